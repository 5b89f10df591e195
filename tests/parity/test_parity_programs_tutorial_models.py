"""PyTorch's model tutorials as programs, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data (char-level name classification is round 7's):
seq2seq with a Bahdanau attention decoder, DCGAN, the
nn.TransformerEncoder language model, scaled_dot_product_attention, a spatial transformer,
FGSM adversarial examples, fine-tuning a frozen backbone, knowledge distillation, a DQN with
a replay memory and a soft target update, EmbeddingBag text classification, and the
sequence-model tutorial's LSTM tagger and N-gram language model. Dropout is
off (p=0 or eval mode) wherever it would run: the two libraries draw different masks."""

import copy
import math
from collections import deque, namedtuple

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def attn_decoder_program(torch):
    """seq2seq tutorial: EncoderRNN (Embedding+GRU), BahdanauAttention (Wa, Ua, Va), AttnDecoderRNN
    with teacher forcing, log_softmax + NLLLoss on view(-1), topk(1) greedy decoding, Adam."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(12)
    in_vocab, out_vocab, hidden, max_len, SOS = 9, 8, 8, 5, 0

    class EncoderRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(in_vocab, hidden)
            self.gru = nn.GRU(hidden, hidden, batch_first=True)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.gru(self.dropout(self.embedding(x)))

    class BahdanauAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.Wa, self.Ua, self.Va = (nn.Linear(hidden, hidden), nn.Linear(hidden, hidden),
                                         nn.Linear(hidden, 1))

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            return torch.bmm(weights, keys), weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(out_vocab, hidden)
            self.attention = BahdanauAttention()
            self.gru = nn.GRU(2 * hidden, hidden, batch_first=True)
            self.out = nn.Linear(hidden, out_vocab)
            self.dropout = nn.Dropout(0.0)

        def forward(self, enc_out, enc_hidden, target=None):
            B = enc_out.size(0)
            dec_in = torch.empty(B, 1, dtype=torch.long).fill_(SOS)
            dec_hidden, outs, attns = enc_hidden, [], []
            for i in range(max_len):
                out, dec_hidden, attn = self.step(dec_in, dec_hidden, enc_out)
                outs.append(out)
                attns.append(attn)
                if target is not None:
                    dec_in = target[:, i].unsqueeze(1)
                else:
                    _, topi = out.topk(1)
                    dec_in = topi.squeeze(-1).detach()
            outs = F.log_softmax(torch.cat(outs, dim=1), dim=-1)
            return outs, dec_hidden, torch.cat(attns, dim=1)

        def step(self, inp, hidden, enc_out):
            embedded = self.dropout(self.embedding(inp))
            query = hidden.permute(1, 0, 2)
            context, attn = self.attention(query, enc_out)
            out, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
            return self.out(out), hidden, attn

    enc, dec = EncoderRNN(), AttnDecoderRNN()
    fill_(torch, [*enc.parameters(), *dec.parameters()], rng)
    src = torch.from_numpy(rng.integers(1, in_vocab, (4, max_len)))
    tgt = torch.from_numpy(rng.integers(1, out_vocab, (4, max_len)))
    eo = torch.optim.Adam(enc.parameters(), lr=1e-2)
    do = torch.optim.Adam(dec.parameters(), lr=1e-2)
    crit = nn.NLLLoss()
    losses = []
    for epoch in range(3):
        enc.train()
        dec.train()
        eo.zero_grad()
        do.zero_grad()
        enc_out, enc_hidden = enc(src)
        dec_out, _, _ = dec(enc_out, enc_hidden, tgt)
        loss = crit(dec_out.view(-1, dec_out.size(-1)), tgt.view(-1))
        loss.backward()
        eo.step()
        do.step()
        losses.append(loss.item())
    enc.eval()
    dec.eval()
    with torch.no_grad():
        enc_out, enc_hidden = enc(src)
        dec_out, dec_hidden, attn = dec(enc_out, enc_hidden)
        _, topi = dec_out.topk(1)
        ids = topi.squeeze()
    return {"loss": losses, "ids": ids.tolist(), "attn": attn, "hidden": dec_hidden}


def dcgan_program(torch):
    """DCGAN: weights_init through Module.apply on class names, ConvTranspose2d(bias=False),
    BatchNorm2d, label tensors with fill_, BCELoss on D(x).view(-1), two Adam(beta1=0.5)."""
    nn = torch.nn
    rng = np.random.default_rng(13)
    nz, ngf, ndf = 4, 4, 4

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            with torch.no_grad():
                init = rng.normal(0.0, 0.02, tuple(m.weight.shape)).astype(np.float32)
                m.weight.copy_(torch.from_numpy(init))
        elif classname.find("BatchNorm") != -1:
            nn.init.constant_(m.weight.data, 1.0)
            nn.init.constant_(m.bias.data, 0)

    netG = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2),
        nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())
    netD = nn.Sequential(
        nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
        nn.LeakyReLU(0.2, inplace=True), nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    netG.apply(weights_init)
    netD.apply(weights_init)
    crit = nn.BCELoss()
    fixed_noise = normal(torch, rng, 4, nz, 1, 1)
    optD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    hist = []
    for _ in range(3):
        real = normal(torch, rng, 6, 1, 16, 16).tanh()
        b_size = real.size(0)
        netD.zero_grad()
        label = torch.full((b_size,), 1.0, dtype=torch.float)
        output = netD(real).view(-1)
        errD_real = crit(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = normal(torch, rng, b_size, nz, 1, 1)
        fake = netG(noise)
        label.fill_(0.0)
        output = netD(fake.detach()).view(-1)
        errD_fake = crit(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        optD.step()
        netG.zero_grad()
        label.fill_(1.0)
        output = netD(fake).view(-1)
        errG = crit(output, label)
        errG.backward()
        optG.step()
        hist.append([(errD_real + errD_fake).item(), errG.item(), D_x, D_G_z1,
                     output.mean().item()])
    with torch.no_grad():
        img = netG(fixed_noise).detach().cpu()
    return {"hist": np.array(hist), "img": img, "rv": netD[3].running_var,
            "nbt": [netG[1].num_batches_tracked.item()]}


def transformer_tutorial_program(torch):
    """Language-modelling tutorial: PositionalEncoding buffer, TransformerEncoder with a causal
    src_mask, batchify/get_batch, SGD + StepLR, clip_grad_norm_, evaluate with perplexity."""
    nn = torch.nn
    rng = np.random.default_rng(14)
    ntokens, d_model, bptt = 11, 8, 4

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=50):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0)])

    class TransformerModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos_encoder = PositionalEncoding(d_model, 0.0)
            layer = nn.TransformerEncoderLayer(d_model, 2, 16, 0.0)
            self.transformer_encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.embedding = nn.Embedding(ntokens, d_model)
            self.linear = nn.Linear(d_model, ntokens)

        def forward(self, src, src_mask=None):
            src = self.embedding(src) * math.sqrt(d_model)
            src = self.pos_encoder(src)
            return self.linear(self.transformer_encoder(src, src_mask))

    def batchify(data, bsz):
        seq_len = data.size(0) // bsz
        return data[:seq_len * bsz].view(bsz, seq_len).t().contiguous()

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)

    model = TransformerModel()
    fill_(torch, model, rng, 0.2)
    train = batchify(torch.from_numpy(rng.integers(0, ntokens, 40)), 3)
    val = batchify(torch.from_numpy(rng.integers(0, ntokens, 20)), 2)
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.95)
    res = {"loss": [], "lr": [], "val": [], "pe": model.pos_encoder.pe[:6, 0]}
    for epoch in range(2):
        model.train()
        for i in range(0, train.size(0) - 1, bptt):
            data, targets = get_batch(train, i)
            mask = nn.Transformer.generate_square_subsequent_mask(data.size(0))
            output = model(data, mask)
            loss = crit(output.view(-1, ntokens), targets)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            res["loss"].append(loss.item())
        model.eval()
        total = 0.0
        with torch.no_grad():
            for i in range(0, val.size(0) - 1, bptt):
                data, targets = get_batch(val, i)
                output = model(data, nn.Transformer.generate_square_subsequent_mask(data.size(0)))
                total += data.size(0) * crit(output.view(-1, ntokens), targets).item()
        res["val"].append(math.exp(total / (len(val) - 1)))
        sched.step()
        res["lr"].append(sched.get_last_lr()[0])
    res["keys"] = list(model.state_dict().keys())[:4]
    return res


def sdpa_program(torch):
    """SDPA tutorial: CausalSelfAttention over F.scaled_dot_product_attention (is_causal, an
    explicit boolean mask, scale=), compared to the math written out, trained with AdamW."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(22)
    n_embd, n_head, T = 8, 2, 5

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
            self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
            self.resid_dropout = nn.Dropout(0.0)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y)), (q, k, v)

    model = CausalSelfAttention()
    fill_(torch, model, rng)
    x = normal(torch, rng, 3, T, n_embd)
    out, (q, k, v) = model(x)
    mask = torch.ones(T, T, dtype=torch.bool).tril(diagonal=0)
    masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    att = (q @ k.transpose(-2, -1)) * 0.3
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    float_mask = torch.zeros(T, T).masked_fill(~mask, float("-inf"))
    with_float = F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = model(x)[0].pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"out": out, "masked": masked, "manual": att @ v, "float": with_float,
            "loss": losses, "w": model.c_attn.weight}


def stn_program(torch):
    """Spatial transformer tutorial: localization net, identity-initialized fc_loc, affine_grid +
    grid_sample inside the classifier, F.dropout bound to self.training, nll_loss, SGD."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(40)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
            self.conv2 = nn.Conv2d(4, 6, kernel_size=3)
            self.conv2_drop = nn.Dropout2d(0.5)
            self.fc1 = nn.Linear(24, 8)
            self.fc2 = nn.Linear(8, 3)
            self.localization = nn.Sequential(
                nn.Conv2d(1, 4, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
                nn.Conv2d(4, 5, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(20, 8), nn.ReLU(True), nn.Linear(8, 6))

        def stn(self, x):
            xs = self.localization(x).view(-1, 20)
            theta = self.fc_loc(xs).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            x = self.stn(x)
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 24)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            return F.log_softmax(self.fc2(x), dim=1)

    model = Net()
    fill_(torch, model, rng, 0.3)
    model.fc_loc[2].weight.data.zero_()
    model.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
    model.fc_loc[2].weight.data.add_(0.05)
    data = normal(torch, rng, 4, 1, 14, 14)
    target = torch.from_numpy(rng.integers(0, 3, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model.eval()    # dropout off: both libraries draw different masks
    losses = []
    for _ in range(3):
        opt.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        test_loss = F.nll_loss(model(data), target, reduction="sum").item()
        pred = model(data).max(1, keepdim=True)[1]
        correct = pred.eq(target.view_as(pred)).sum().item()
        warped = model.stn(data)
    return {"loss": losses, "test": [test_loss], "correct": [correct], "warped": warped,
            "theta_grad": model.fc_loc[2].weight.grad}


def fgsm_program(torch):
    """Adversarial examples: data.requires_grad, F.nll_loss, data.grad.data.sign(), clamp to
    [0, 1], init_pred from max(1, keepdim=True)[1], per-epsilon accuracy."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(41)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5),
                          nn.LogSoftmax(dim=1))
    fill_(torch, model, rng, 0.3)
    model.eval()
    images = torch.from_numpy(rng.random((6, 1, 1, 8, 8)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 5, (6, 1)))
    res = {"acc": [], "examples": []}
    for epsilon in (0.0, 0.05, 0.2):
        correct = 0
        for data, target in zip(images, labels):
            data.requires_grad = True
            output = model(data)
            init_pred = output.max(1, keepdim=True)[1]
            loss = F.nll_loss(output, target)
            model.zero_grad()
            loss.backward()
            data_grad = data.grad.data
            perturbed = torch.clamp(data + epsilon * data_grad.sign(), 0, 1)
            final_pred = model(perturbed).max(1, keepdim=True)[1]
            if final_pred.item() == target.item():
                correct += 1
            res["examples"].append(perturbed.squeeze().detach().cpu().numpy())
            data.grad = None
            res.setdefault("init", []).append(init_pred.item())
        res["acc"].append(correct / float(len(images)))
    return res


def finetune_program(torch):
    """Transfer learning: frozen backbone (requires_grad=False), new head, SGD momentum on
    head params only, StepLR, torch.max(outputs, 1) preds, running_corrects.double(),
    best_model_wts by copy.deepcopy(state_dict) and load_state_dict at the end."""
    nn = torch.nn
    rng = np.random.default_rng(42)
    backbone = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten())
    fill_(torch, backbone, rng)
    for param in backbone.parameters():
        param.requires_grad = False
    model = nn.Sequential(backbone, nn.Linear(4, 2))
    fill_(torch, model[1], rng)
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model[1].parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    inputs = normal(torch, rng, 8, 3, 5, 5)
    labels = torch.from_numpy(rng.integers(0, 2, 8))
    best_acc, best_wts = 0.0, copy.deepcopy(model.state_dict())
    res = {"loss": [], "acc": [], "lr": []}
    for epoch in range(4):
        for phase in ("train", "val"):
            model.train() if phase == "train" else model.eval()
            opt.zero_grad()
            with torch.set_grad_enabled(phase == "train"):
                outputs = model(inputs)
                _, preds = torch.max(outputs, 1)
                loss = crit(outputs, labels)
                if phase == "train":
                    loss.backward()
                    opt.step()
            if phase == "train":
                sched.step()
            running_corrects = torch.sum(preds == labels.data)
            acc = running_corrects.double() / len(labels)
            res["loss"].append(loss.item() * inputs.size(0))
            res["acc"].append(acc.item())
            if phase == "val" and acc > best_acc:
                best_acc, best_wts = acc, copy.deepcopy(model.state_dict())
        res["lr"].append(opt.param_groups[0]["lr"])
    model.load_state_dict(best_wts)
    res["best"] = [float(best_acc)]
    res["best_dtype"] = [str(best_acc.dtype).split(".")[-1]]
    res["head"] = model[1].weight
    res["rm"] = backbone[1].running_mean
    res["frozen_grad"] = [p.grad is None for p in backbone.parameters()]
    return res


def distillation_program(torch):
    """Knowledge distillation tutorial: temperature-softened KL by hand and by F.kl_div, a
    CosineEmbeddingLoss on hidden representations pooled with avg_pool1d, MSE on a regressor
    feature map, a frozen teacher in eval mode."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(50)

    class Net(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(2, width, 3, padding=1), nn.ReLU(),
                                          nn.MaxPool2d(2))
            self.classifier = nn.Sequential(nn.Linear(width * 16, 8), nn.ReLU(), nn.Dropout(0.1),
                                            nn.Linear(8, 3))

        def forward(self, x):
            x = torch.flatten(self.features(x), 1)
            hidden = x
            return self.classifier(x), hidden

    teacher, student = Net(8), Net(4)
    fill_(torch, teacher, rng, 0.3)
    fill_(torch, student, rng, 0.3)
    teacher.eval()
    student.eval()   # dropout off in both (their masks differ)
    inputs, labels = normal(torch, rng, 5, 2, 8, 8), torch.from_numpy(rng.integers(0, 3, 5))
    ce, cos = nn.CrossEntropyLoss(), nn.CosineEmbeddingLoss()
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)
    T, res = 2.0, {"kd": [], "kl": [], "cos": [], "total": []}
    for _ in range(3):
        opt.zero_grad()
        with torch.no_grad():
            teacher_logits, teacher_hidden = teacher(inputs)
        student_logits, student_hidden = student(inputs)
        soft_targets = F.softmax(teacher_logits / T, dim=-1)
        soft_prob = F.log_softmax(student_logits / T, dim=-1)
        kd = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0]
        kd = kd * T ** 2
        kl = F.kl_div(soft_prob, soft_targets, reduction="batchmean") * T ** 2
        pooled_t = F.avg_pool1d(teacher_hidden, 2)
        pooled_s = student_hidden
        cos_loss = cos(pooled_s, pooled_t[:, :pooled_s.size(1)], target=torch.ones(inputs.size(0)))
        loss = 0.25 * kd + 0.75 * ce(student_logits, labels) + 0.1 * cos_loss
        loss.backward()
        opt.step()
        for k, v in (("kd", kd), ("kl", kl), ("cos", cos_loss), ("total", loss)):
            res[k].append(v.item())
    res["w"] = student.classifier[0].weight
    return res


def replay_dqn_program(torch):
    """DQN tutorial's ReplayMemory of Transition namedtuples: zip(*transitions), torch.cat of the
    state tuple, a non-final mask from map over next states, greedy actions by
    policy(state).max(1).indices.view(1, 1), and a soft target update through state dicts."""
    nn = torch.nn
    rng = np.random.default_rng(51)
    Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))

    class ReplayMemory:
        def __init__(self, capacity):
            self.memory = deque([], maxlen=capacity)

        def push(self, *args):
            self.memory.append(Transition(*args))

        def sample(self, idx):
            return [self.memory[i] for i in idx]

        def __len__(self):
            return len(self.memory)

    policy = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 2))
    target = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 2))
    fill_(torch, policy, rng, 0.5)
    target.load_state_dict(policy.state_dict())
    memory = ReplayMemory(20)
    def observe():
        return torch.tensor(rng.standard_normal(4), dtype=torch.float32).unsqueeze(0)

    state = observe()
    actions = []
    for t in range(24):
        with torch.no_grad():
            action = policy(state).max(1).indices.view(1, 1)
        actions.append(action.item())
        nxt = None if t % 7 == 6 else observe()
        memory.push(state, action, nxt, torch.tensor([float(rng.standard_normal())]))
        state = nxt if nxt is not None else observe()
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3, amsgrad=True)
    losses = []
    for step in range(3):
        batch = Transition(*zip(*memory.sample(rng.permutation(len(memory))[:8].tolist())))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                      dtype=torch.bool)
        non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
        state_batch, action_batch, reward_batch = (torch.cat(batch.state), torch.cat(batch.action),
                                                   torch.cat(batch.reward))
        q = policy(state_batch).gather(1, action_batch)
        next_values = torch.zeros(8)
        with torch.no_grad():
            next_values[non_final_mask] = target(non_final_next_states).max(1).values
        expected = (next_values * 0.99) + reward_batch
        loss = nn.SmoothL1Loss()(q, expected.unsqueeze(1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(policy.parameters(), 100)
        opt.step()
        target_state, policy_state = target.state_dict(), policy.state_dict()
        for key in policy_state:
            target_state[key] = policy_state[key] * 0.005 + target_state[key] * (1 - 0.005)
        target.load_state_dict(target_state)
        losses.append(loss.item())
    return {"actions": actions, "loss": losses, "w": policy[0].weight, "len": [len(memory)],
            "target": target[2].weight}


def embedding_bag_program(torch):
    """Text classification tutorial: collate_batch building offsets by cumsum, EmbeddingBag(mean)
    + Linear, SGD lr=5 with clip_grad_norm_(0.1), StepLR(gamma=0.1), accuracy by argmax."""
    nn = torch.nn
    rng = np.random.default_rng(52)
    vocab, classes = 20, 3
    raw = [(int(rng.integers(0, classes)), rng.integers(0, vocab, int(rng.integers(2, 7))).tolist())
           for _ in range(12)]

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(_label)
            processed = torch.tensor(_text, dtype=torch.int64)
            text_list.append(processed)
            offsets.append(processed.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        return label_list, torch.cat(text_list), offsets

    class TextClassificationModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab, 6, sparse=False)
            self.fc = nn.Linear(6, classes)

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    model = TextClassificationModel()
    fill_(torch, model, rng, 0.5)
    loader = torch.utils.data.DataLoader(raw, batch_size=4, shuffle=False, collate_fn=collate_batch)
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=5)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.1)
    res = {"loss": [], "acc": [], "offsets": []}
    for epoch in range(2):
        total_acc = total_count = 0
        for label, text, offsets in loader:
            opt.zero_grad()
            predicted = model(text, offsets)
            loss = crit(predicted, label)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            opt.step()
            total_acc += (predicted.argmax(1) == label).sum().item()
            total_count += label.size(0)
            res["loss"].append(loss.item())
            res["offsets"].append(offsets.tolist())
        res["acc"].append(total_acc / total_count)
        sched.step()
    res["emb"] = model.embedding.weight
    return res


def lstm_tagger_program(torch):
    """Sequence models tutorial: an LSTM stepped one word at a time with an (h, c) tuple,
    then an LSTMTagger over a whole sentence with view(len(sentence), 1, -1), log_softmax
    scores, NLLLoss and SGD; an N-gram language model trained on context embeddings."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(70)
    lstm = nn.LSTM(3, 3)
    fill_(torch, lstm, rng)
    inputs = [normal(torch, rng, 1, 3) for _ in range(5)]
    hidden = (normal(torch, rng, 1, 1, 3), normal(torch, rng, 1, 1, 3))
    for i in inputs:
        out, hidden = lstm(i.view(1, 1, -1), hidden)
    whole, whole_hidden = lstm(torch.cat(inputs).view(len(inputs), 1, -1), hidden)
    res = {"step": out, "h": hidden[0], "c": hidden[1], "whole": whole, "wh": whole_hidden[1]}
    words = "the dog ate the apple everybody read that book".split()
    ix = {w: i for i, w in enumerate(dict.fromkeys(words))}
    data = [("the dog ate the apple".split(), [0, 1, 2, 0, 1]),
            ("everybody read that book".split(), [1, 2, 0, 1])]

    class LSTMTagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(len(ix), 6)
            self.lstm = nn.LSTM(6, 5)
            self.hidden2tag = nn.Linear(5, 3)

        def forward(self, sentence):
            embeds = self.word_embeddings(sentence)
            lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
            return F.log_softmax(self.hidden2tag(lstm_out.view(len(sentence), -1)), dim=1)

    model = LSTMTagger()
    fill_(torch, model, rng)
    loss_function, opt = nn.NLLLoss(), torch.optim.SGD(model.parameters(), lr=0.1)
    res["tag_loss"] = []
    for _ in range(3):
        for sentence, tags in data:
            model.zero_grad()
            sentence_in = torch.tensor([ix[w] for w in sentence], dtype=torch.long)
            loss = loss_function(model(sentence_in), torch.tensor(tags, dtype=torch.long))
            loss.backward()
            opt.step()
            res["tag_loss"].append(loss.item())
    with torch.no_grad():
        res["scores"] = model(torch.tensor([ix[w] for w in data[0][0]], dtype=torch.long))

    class NGramLanguageModeler(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = nn.Embedding(len(ix), 4)
            self.linear1, self.linear2 = nn.Linear(2 * 4, 8), nn.Linear(8, len(ix))

        def forward(self, inputs):
            embeds = self.embeddings(inputs).view((1, -1))
            return F.log_softmax(self.linear2(F.relu(self.linear1(embeds))), dim=1)

    ngrams = [([words[i - j - 1] for j in range(2)], words[i]) for i in range(2, len(words))]
    lm = NGramLanguageModeler()
    fill_(torch, lm, rng)
    opt = torch.optim.SGD(lm.parameters(), lr=0.01)
    losses = []
    for _ in range(2):
        total = 0
        for context, target in ngrams:
            lm.zero_grad()
            log_probs = lm(torch.tensor([ix[w] for w in context], dtype=torch.long))
            loss = loss_function(log_probs, torch.tensor([ix[target]], dtype=torch.long))
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total)
    res["lm_loss"], res["apple"] = losses, lm.embeddings.weight[ix["apple"]]
    return res


PROGRAMS = [attn_decoder_program, dcgan_program, transformer_tutorial_program,
            sdpa_program, stn_program, fgsm_program, finetune_program, distillation_program,
            replay_dqn_program, embedding_bag_program, lstm_tagger_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=1e-5, atol=1e-6)
