"""The official PyTorch tutorials, rewritten as small programs on synthetic data and run once with
`torch` bound to ember and once to PyTorch (weights and data from one NumPy generator): a custom
autograd.Function polynomial fit, "What is torch.nn really" (manual, DataLoader, CNN with Lambda),
transfer learning with a frozen extractor and StepLR, char-RNN classification and generation,
seq2seq with Bahdanau attention, DCGAN, DQN with a replay memory and a soft-updated target net,
a TransformerEncoder language model, Functions with setup_context (one calls NumPy in forward),
and the Jacobians/Hessians tutorial."""

import math
import random
import string
from collections import deque, namedtuple

import numpy as np
import pytest

import ember
from tests.parity._programs import normal
from tests.parity.test_parity_programs_round3 import assert_same_results, fill_

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def legendre_program(torch):
    """Fit sin with a + b * P3(c + d * x), P3 a custom Function, by manual gradient steps."""
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    a, c = (torch.full((), 0.0, requires_grad=True) for _ in range(2))
    b, d = torch.full((), -1.0, requires_grad=True), torch.full((), 0.3, requires_grad=True)
    losses = []
    for _ in range(60):
        y_pred = a + b * LegendrePolynomial3.apply(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= 5e-6 * p.grad
                p.grad = None
    return {"loss": losses, "abcd": [p.item() for p in (a, b, c, d)],
            "grad_fn": [type(y_pred.grad_fn).__name__]}


def nn_really_program(torch):
    """MNIST-shaped logistic regression by hand, then through a DataLoader, then a CNN."""
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    rng = np.random.default_rng(3)
    x_train, x_valid = (torch.tensor(rng.random((n, 784)).astype(np.float32)) for n in (128, 64))
    y_train, y_valid = (torch.tensor(rng.integers(0, 10, n)) for n in (128, 64))
    weights = (normal(torch, rng, 784, 10) / math.sqrt(784)).requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def model(xb):
        z = xb @ weights + bias
        return z - z.exp().sum(-1).log().unsqueeze(-1)

    manual = []
    for i in range(2):
        xb, yb = x_train[i * 64:(i + 1) * 64], y_train[i * 64:(i + 1) * 64]
        loss = -model(xb)[range(yb.shape[0]), yb].mean()
        loss.backward()
        manual.append(loss.item())
        with torch.no_grad():
            weights -= weights.grad * 0.5
            bias -= bias.grad * 0.5
            weights.grad.zero_()
            bias.grad.zero_()

    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    cnn = nn.Sequential(Lambda(lambda x: x.view(-1, 1, 28, 28)),
                        nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(),
                        nn.Conv2d(4, 10, 3, stride=2, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), Lambda(lambda x: x.view(x.size(0), -1)))
    fill_(torch, cnn.parameters(), rng, 0.3)
    opt = torch.optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9)
    train_dl = data.DataLoader(data.TensorDataset(x_train, y_train), batch_size=64)
    valid_dl = data.DataLoader(data.TensorDataset(x_valid, y_valid), batch_size=128)
    trained = []
    for _ in range(2):
        cnn.train()
        for xb, yb in train_dl:
            loss = F.cross_entropy(cnn(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
            trained.append(loss.item())
        cnn.eval()
        with torch.no_grad():
            trained.append(sum(F.cross_entropy(cnn(xb), yb) for xb, yb in valid_dl).item())
    return {"manual": manual, "cnn": trained,
            "accuracy": [(torch.argmax(model(x_valid), dim=1) == y_valid).float().mean().item()]}


def transfer_program(torch):
    """Freeze a small CNN's features, replace its head, train with StepLR in train/val phases."""
    nn = torch.nn
    rng = np.random.default_rng(7)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
                          nn.Linear(8, 5))
    fill_(torch, model.parameters(), rng, 0.2)
    for param in model.parameters():
        param.requires_grad = False
    model[6] = nn.Linear(model[6].in_features, 2)
    fill_(torch, model[6].parameters(), rng, 0.2)
    opt = torch.optim.SGD(model[6].parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    x, y = normal(torch, rng, 6, 3, 12, 12), torch.from_numpy(rng.integers(0, 2, 6))
    losses, lrs = [], []
    for _ in range(4):
        for phase in ("train", "val"):
            model.train(phase == "train")
            opt.zero_grad()
            with torch.set_grad_enabled(phase == "train"):
                outputs = model(x)
                _, preds = torch.max(outputs, 1)
                loss = nn.CrossEntropyLoss()(outputs, y)
                if phase == "train":
                    loss.backward()
                    opt.step()
                    scheduler.step()
            losses += [loss.item(), torch.sum(preds == y.data).double().item()]
        lrs.append(scheduler.get_last_lr()[0])
    return {"loss": losses, "lr": lrs, "running_mean": model[1].running_mean.numpy(),
            "frozen": [p.grad is None for p in model.parameters()],
            "head": model[6].weight.detach().numpy()}


LETTERS = string.ascii_letters + " .,;'"


def char_rnn_program(torch):
    """Classify names with nn.RNN over one-hot letters, then sample a name greedily."""
    nn = torch.nn
    rng = np.random.default_rng(8)

    def line_to_tensor(line):
        tensor = torch.zeros(len(line), 1, len(LETTERS))
        for i, letter in enumerate(line):
            tensor[i][0][LETTERS.find(letter)] = 1
        return tensor

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.h2o = nn.RNN(len(LETTERS), 16), nn.Linear(16, 4)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, line):
            _, hidden = self.rnn(line)
            return self.softmax(self.h2o(hidden[0]))

    rnn = CharRNN()
    fill_(torch, rnn.parameters(), rng, 0.3)
    opt = torch.optim.SGD(rnn.parameters(), lr=0.15)
    losses = []
    for name, label in [("Albert", 0), ("Nguyen", 1), ("O'Neal", 0), ("Satoshi", 2)] * 2:
        loss = nn.NLLLoss()(rnn(line_to_tensor(name)), torch.tensor([label]))
        loss.backward()
        nn.utils.clip_grad_norm_(rnn.parameters(), 3)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    decoder = nn.Linear(len(LETTERS) + 16, 16)
    head = nn.Linear(16, len(LETTERS) + 1)
    fill_(torch, list(decoder.parameters()) + list(head.parameters()), rng, 0.3)
    hidden, name = torch.zeros(1, 16), "A"
    with torch.no_grad():
        for _ in range(5):
            hidden = torch.tanh(decoder(torch.cat((line_to_tensor(name[-1])[0], hidden), 1)))
            _, top = nn.functional.log_softmax(head(hidden), dim=1).topk(1)
            if top[0][0] == len(LETTERS):
                break
            name += LETTERS[top[0][0]]
    return {"loss": losses, "guess": [rnn(line_to_tensor("Jones")).topk(1)[1].item()],
            "name": [name]}


def seq2seq_program(torch):
    """GRU encoder and Bahdanau-attention decoder trained with teacher forcing, then greedy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(9)
    hidden_size, vocab, length = 12, 9, 5

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys))).squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            return torch.bmm(weights, keys), weights

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.attention = nn.Embedding(vocab, hidden_size), Attention()
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, vocab)

        def forward(self, encoder_outputs, hidden, target=None):
            step_input = torch.empty(encoder_outputs.size(0), 1, dtype=torch.long).fill_(0)
            outputs, attentions = [], []
            for i in range(length):
                context, weights = self.attention(hidden.permute(1, 0, 2), encoder_outputs)
                gru_in = torch.cat((self.embedding(step_input), context), dim=2)
                output, hidden = self.gru(gru_in, hidden)
                outputs.append(self.out(output))
                attentions.append(weights)
                if target is not None:
                    step_input = target[:, i].unsqueeze(1)
                else:
                    step_input = outputs[-1].topk(1)[1].squeeze(-1).detach()
            return F.log_softmax(torch.cat(outputs, dim=1), dim=-1), torch.cat(attentions, dim=1)

    embedding = nn.Embedding(vocab, hidden_size)
    encoder, decoder = nn.GRU(hidden_size, hidden_size, batch_first=True), Decoder()
    params = [*embedding.parameters(), *encoder.parameters(), *decoder.parameters()]
    fill_(torch, params, rng, 0.3)
    opt = torch.optim.Adam(params, lr=0.01)
    source, target = (torch.from_numpy(rng.integers(1, vocab, (4, length))) for _ in range(2))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        decoded, _ = decoder(*encoder(embedding(source)), target)
        loss = nn.NLLLoss()(decoded.view(-1, vocab), target.view(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        decoded, attention = decoder(*encoder(embedding(source[:1])))
    return {"loss": losses, "ids": decoded.topk(1)[1].squeeze().tolist(),
            "attention": attention.numpy()}


def dcgan_program(torch):
    """DCGAN steps: BatchNorm, ConvTranspose2d, LeakyReLU in place, BCELoss, Adam(0.5, 0.999)."""
    nn = torch.nn
    rng = np.random.default_rng(10)
    generator = nn.Sequential(nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16),
                              nn.ReLU(True), nn.ConvTranspose2d(16, 3, 4, 2, 1, bias=False),
                              nn.Tanh())
    critic = nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                           nn.Conv2d(4, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8),
                           nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(8, 1, 2, 1, 0, bias=False),
                           nn.Sigmoid())
    fill_(torch, generator.parameters(), rng, 0.1)
    fill_(torch, critic.parameters(), rng, 0.1)
    criterion = nn.BCELoss()
    opt_d = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    losses = []
    for _ in range(3):
        real = normal(torch, rng, 4, 3, 8, 8).tanh()
        critic.zero_grad()
        label = torch.full((4,), 1.0, dtype=torch.float)
        err_real = criterion(critic(real).view(-1), label)
        err_real.backward()
        fake = generator(normal(torch, rng, 4, 8, 1, 1))
        label.fill_(0.0)
        err_fake = criterion(critic(fake.detach()).view(-1), label)
        err_fake.backward()
        opt_d.step()
        generator.zero_grad()
        label.fill_(1.0)
        err_g = criterion(critic(fake).view(-1), label)
        err_g.backward()
        opt_g.step()
        losses += [(err_real + err_fake).item(), err_g.item()]
    return {"loss": losses, "running_var": critic[3].running_var.numpy(),
            "generator": generator[0].weight.detach().numpy()}


Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


def dqn_program(torch):
    """DQN: replay memory, masked next-state values, SmoothL1, clip_grad_value_, soft updates."""
    nn, F = torch.nn, torch.nn.functional
    rng, sampler = np.random.default_rng(14), random.Random(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    target = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    fill_(torch, policy.parameters(), rng, 0.3)
    target.load_state_dict(policy.state_dict())
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3, amsgrad=True)
    memory = deque([], maxlen=100)
    state = normal(torch, rng, 1, 4)
    losses, actions = [], []
    for step in range(20):
        with torch.no_grad():
            action = policy(state).max(1).indices.view(1, 1)
        actions.append(action.item())
        next_state = None if step % 7 == 6 else normal(torch, rng, 1, 4)
        memory.append(Transition(state, action, next_state, torch.tensor([float(rng.random())])))
        state = next_state if next_state is not None else normal(torch, rng, 1, 4)
        if len(memory) < 8:
            continue
        batch = Transition(*zip(*sampler.sample(memory, 8)))
        non_final = torch.tensor(tuple(s is not None for s in batch.next_state), dtype=torch.bool)
        chosen = policy(torch.cat(batch.state)).gather(1, torch.cat(batch.action))
        next_values = torch.zeros(8)
        with torch.no_grad():
            next_states = torch.cat([s for s in batch.next_state if s is not None])
            next_values[non_final] = target(next_states).max(1).values
        expected = next_values * 0.99 + torch.cat(batch.reward)
        loss = F.smooth_l1_loss(chosen, expected.unsqueeze(1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(policy.parameters(), 100)
        opt.step()
        losses.append(loss.item())
        target_state, policy_state = target.state_dict(), policy.state_dict()
        for key in policy_state:
            target_state[key] = policy_state[key] * 0.005 + target_state[key] * 0.995
        target.load_state_dict(target_state)
    return {"loss": losses, "actions": actions, "target": target[0].weight.detach().numpy()}


def transformer_lm_program(torch):
    """Sinusoidal positions, TransformerEncoder with a causal mask, batchify/bptt, clipping."""
    nn = torch.nn
    rng = np.random.default_rng(15)
    position = torch.arange(20).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, 16, 2) * (-math.log(10000.0) / 16))
    pe = torch.zeros(20, 1, 16)
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    layer = nn.TransformerEncoderLayer(16, 2, 32, 0.0)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    embedding, decoder = nn.Embedding(20, 16), nn.Linear(16, 20)
    params = [*encoder.parameters(), *embedding.parameters(), *decoder.parameters()]
    fill_(torch, params, rng, 0.15)

    def model(src):
        mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        return decoder(encoder(embedding(src) * math.sqrt(16) + pe[:src.size(0)], mask))

    tokens = torch.from_numpy(rng.integers(0, 20, 48))
    train = tokens.view(4, 12).t().contiguous()
    opt = torch.optim.SGD(params, lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.95)
    losses = []
    for i in range(0, train.size(0) - 1, 5):
        seq_len = min(5, len(train) - 1 - i)
        data, targets = train[i:i + seq_len], train[i + 1:i + 1 + seq_len].reshape(-1)
        loss = nn.CrossEntropyLoss()(model(data).view(-1, 20), targets)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        losses.append(loss.item())
    scheduler.step()
    encoder.eval()
    with torch.no_grad():
        logits = model(train[:5])
    return {"loss": losses, "logits": logits.numpy(), "lr": scheduler.get_last_lr(),
            "mask": nn.Transformer.generate_square_subsequent_mask(3).numpy()}


def setup_context_program(torch):
    """Functions with a separate setup_context: a linear layer, one with a vmap rule, and a sort
    that leaves autograd for NumPy in forward (legal: forward runs with grad mode off)."""
    class LinearFunction(torch.autograd.Function):
        @staticmethod
        def forward(input, weight, bias):
            return input.mm(weight.t()) + bias.unsqueeze(0)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, _ = ctx.saved_tensors
            return grad_output.mm(weight), grad_output.t().mm(input), grad_output.sum(0)

    class MulConstant(torch.autograd.Function):
        @staticmethod
        def forward(tensor, constant):
            return tensor * constant

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.constant = inputs[1]

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

        @staticmethod
        def vmap(info, in_dims, tensor, constant):
            return MulConstant.apply(tensor, constant), in_dims[0]

    class NumpySort(torch.autograd.Function):
        @staticmethod
        def forward(x, dim):
            order = np.argsort(x.numpy(), axis=dim)
            inverse = np.argsort(order, axis=dim)
            return (torch.tensor(np.take_along_axis(x.numpy(), order, axis=dim)),
                    torch.tensor(order), torch.tensor(inverse))

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.mark_non_differentiable(output[1], output[2])
            ctx.save_for_backward(output[2])
            ctx.dim = inputs[1]

        @staticmethod
        def backward(ctx, grad_output, _order, _inverse):
            inverse, = ctx.saved_tensors
            return grad_output.gather(ctx.dim, inverse), None

    rng = np.random.default_rng(30)
    x, w, b = (normal(torch, rng, *shape).double().requires_grad_()
               for shape in [(4, 3), (5, 3), (5,)])
    LinearFunction.apply(x, w, b).pow(2).sum().backward()
    y = normal(torch, rng, 3, 4)
    s = normal(torch, rng, 3, 5).requires_grad_()
    values, order, _ = NumpySort.apply(s, 1)
    (values * torch.arange(5.0)).sum().backward()
    return {"x_grad": x.grad.numpy(), "w_grad": w.grad.numpy(), "b_grad": b.grad.numpy(),
            "vmapped": torch.vmap(MulConstant.apply, in_dims=(0, None))(y, 3.0).numpy(),
            "mul_grad": torch.func.grad(lambda t: MulConstant.apply(t, 2.5).sum())(y).numpy(),
            "sort_grad": s.grad.numpy(), "order": order.flatten().tolist(),
            "flags": [order.requires_grad, values.requires_grad]}


def jacobians_program(torch):
    """The Jacobians/Hessians tutorial: vjp rows, jacrev/jacfwd, hessians, batched, hvp."""
    func = torch.func
    rng = np.random.default_rng(23)
    weight, bias, x = normal(torch, rng, 6, 6), normal(torch, rng, 6), normal(torch, rng, 6)

    def predict(weight, bias, x):
        return torch.nn.functional.linear(x, weight, bias).tanh()

    _, vjp_fn = func.vjp(lambda x: predict(weight, bias, x), x)
    rows, = func.vmap(vjp_fn)(torch.eye(6))
    jac_weight, jac_bias = func.jacrev(predict, argnums=(0, 1))(weight, bias, x)
    xs = normal(torch, rng, 4, 6)
    batched = func.vmap(func.jacrev(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs)
    summed = func.jacrev(lambda w, b, x: predict(w, b, x).sum(0), argnums=2)(weight, bias, xs)
    hessians = func.vmap(func.hessian(predict, argnums=2), (None, None, 0))(weight, bias, xs)
    forward_twice = func.jacfwd(func.jacfwd(predict, argnums=2), argnums=2)(weight, bias, x)
    primal, tangent = normal(torch, rng, 8), normal(torch, rng, 8)
    hvp = func.jvp(func.grad(lambda t: t.sin().sum()), (primal,), (tangent,))[1]
    jac_forward = func.jacfwd(predict, argnums=2)(weight, bias, x)
    return {"rows": rows.numpy(), "jacfwd": jac_forward.numpy(),
            "jac_weight": jac_weight.numpy(), "jac_bias": jac_bias.numpy(),
            "batched": batched.numpy(), "summed": summed.movedim(1, 0).numpy(),
            "hessians": hessians.numpy(), "forward_twice": forward_twice.numpy(),
            "hvp": hvp.numpy()}


@pytest.mark.parametrize("program", [legendre_program, nn_really_program, transfer_program,
                                     char_rnn_program, seq2seq_program, dcgan_program,
                                     dqn_program, transformer_lm_program, setup_context_program,
                                     jacobians_program],
                         ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch))
