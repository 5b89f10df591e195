"""Image captioning and VQA written as their reference repositories (sgrvinod's show-attend-tell
tutorial, hengyuan-hu's bottom-up-attention-vqa) write them in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights and data: show-attend-tell
(encoder features pooled and permuted, captions sorted by length, an LSTMCell decoder shrinking
its batch each step, soft attention with a sigmoid gate, pack_padded_sequence(...).data for the
loss, doubly stochastic attention regularisation, grad clamp_, top-5 accuracy, beam search) and
bottom-up top-down VQA (weight-normed FCNets, a GRU question encoder over GloVe-initialised
embeddings with a padding row, top-down attention over region features, multi-label soft scores
by BCE with logits times the number of answers, Adamax, clip_grad_norm_, one-hot scoring by
scatter_). Sibling _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _show_attend_tell(torch, vocab_size, enc_dim=6, att_dim=5, emb_dim=4, dec_dim=7):
    """The tutorial's Attention and DecoderWithAttention modules."""
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder_att = nn.Linear(enc_dim, att_dim)
            self.decoder_att = nn.Linear(dec_dim, att_dim)
            self.full_att = nn.Linear(att_dim, 1)
            self.relu = nn.ReLU()
            self.softmax = nn.Softmax(dim=1)

        def forward(self, encoder_out, decoder_hidden):
            att1 = self.encoder_att(encoder_out)
            att2 = self.decoder_att(decoder_hidden)
            att = self.full_att(self.relu(att1 + att2.unsqueeze(1))).squeeze(2)
            alpha = self.softmax(att)
            attention_weighted_encoding = (encoder_out * alpha.unsqueeze(2)).sum(dim=1)
            return attention_weighted_encoding, alpha

    class DecoderWithAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder_dim, self.vocab_size = enc_dim, vocab_size
            self.attention = Attention()
            self.embedding = nn.Embedding(vocab_size, emb_dim)
            self.dropout = nn.Dropout(p=0.0)
            self.decode_step = nn.LSTMCell(emb_dim + enc_dim, dec_dim, bias=True)
            self.init_h = nn.Linear(enc_dim, dec_dim)
            self.init_c = nn.Linear(enc_dim, dec_dim)
            self.f_beta = nn.Linear(dec_dim, enc_dim)
            self.sigmoid = nn.Sigmoid()
            self.fc = nn.Linear(dec_dim, vocab_size)
            self.embedding.weight.data.uniform_(-0.1, 0.1)
            self.fc.bias.data.fill_(0)
            self.fc.weight.data.uniform_(-0.1, 0.1)

        def fine_tune_embeddings(self, fine_tune=True):
            for p in self.embedding.parameters():
                p.requires_grad = fine_tune

        def init_hidden_state(self, encoder_out):
            mean_encoder_out = encoder_out.mean(dim=1)
            return self.init_h(mean_encoder_out), self.init_c(mean_encoder_out)

        def forward(self, encoder_out, encoded_captions, caption_lengths):
            batch_size = encoder_out.size(0)
            encoder_dim = encoder_out.size(-1)
            vocab_size = self.vocab_size
            encoder_out = encoder_out.view(batch_size, -1, encoder_dim)
            num_pixels = encoder_out.size(1)
            caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
            encoder_out = encoder_out[sort_ind]
            encoded_captions = encoded_captions[sort_ind]
            embeddings = self.embedding(encoded_captions)
            h, c = self.init_hidden_state(encoder_out)
            decode_lengths = (caption_lengths - 1).tolist()
            predictions = torch.zeros(batch_size, max(decode_lengths), vocab_size)
            alphas = torch.zeros(batch_size, max(decode_lengths), num_pixels)
            for t in range(max(decode_lengths)):
                batch_size_t = sum([length > t for length in decode_lengths])
                attention_weighted_encoding, alpha = self.attention(encoder_out[:batch_size_t],
                                                                    h[:batch_size_t])
                gate = self.sigmoid(self.f_beta(h[:batch_size_t]))
                attention_weighted_encoding = gate * attention_weighted_encoding
                h, c = self.decode_step(
                    torch.cat([embeddings[:batch_size_t, t, :], attention_weighted_encoding],
                              dim=1),
                    (h[:batch_size_t], c[:batch_size_t]))
                preds = self.fc(self.dropout(h))
                predictions[:batch_size_t, t, :] = preds
                alphas[:batch_size_t, t, :] = alpha
            return predictions, encoded_captions, decode_lengths, alphas, sort_ind

    return DecoderWithAttention()


def show_attend_tell_program(torch):
    """A few training steps of the tutorial's train(): a frozen conv 'encoder' (adaptive avg
    pool to 3x3, permute to NHWC) then the decoder; targets caps_sorted[:, 1:], both packed with
    pack_padded_sequence(...).data, cross-entropy plus alpha_c * ((1 - alphas.sum(1))**2).mean(),
    clip_gradient by clamp_ on .grad.data, accuracy by topk/eq/expand_as, AverageMeter-style
    running sums; the embedding frozen in the last step."""
    nn = torch.nn
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    rng = np.random.default_rng(2811)
    B, vocab, max_len = 4, 9, 6

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, stride=2, padding=1)
            self.adaptive_pool = nn.AdaptiveAvgPool2d((3, 3))
            for p in self.conv.parameters():
                p.requires_grad = False

        def forward(self, images):
            out = self.adaptive_pool(torch.relu(self.conv(images)))
            return out.permute(0, 2, 3, 1)

    encoder, decoder = Encoder(), _show_attend_tell(torch, vocab)
    fill_(torch, encoder, rng)
    fill_(torch, decoder, rng)
    images = normal(torch, rng, B, 3, 10, 10)
    lengths = np.array([4, 6, 3, 5])
    caps = np.zeros((B, max_len), np.int64)
    for i, n in enumerate(lengths):
        caps[i, :n] = np.concatenate([[1], rng.integers(3, vocab, n - 2), [2]])
    caps = torch.from_numpy(caps)
    caplens = torch.from_numpy(lengths.reshape(B, 1))
    decoder_optimizer = torch.optim.Adam(
        params=filter(lambda p: p.requires_grad, decoder.parameters()), lr=4e-3)
    criterion = nn.CrossEntropyLoss()
    alpha_c, grad_clip = 1.0, 0.05
    res = {"encoder_trainable": [p.requires_grad for p in encoder.parameters()]}
    losses, top5s, sums = [], [], [0.0, 0]
    for step in range(3):
        if step == 2:
            decoder.fine_tune_embeddings(False)
        imgs = encoder(images)
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)
        targets = caps_sorted[:, 1:]
        scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data
        loss = criterion(scores, targets)
        loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()
        decoder_optimizer.zero_grad()
        loss.backward()
        for group in decoder_optimizer.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    param.grad.data.clamp_(-grad_clip, grad_clip)
        decoder_optimizer.step()
        _, ind = scores.topk(5, 1, True, True)
        correct = ind.eq(targets.view(-1, 1).expand_as(ind))
        correct_total = correct.view(-1).float().sum()
        top5s.append(correct_total.item() * (100.0 / targets.size(0)))
        losses.append(loss.item())
        sums[0] += loss.item() * sum(decode_lengths)
        sums[1] += sum(decode_lengths)
    res.update(losses=losses, top5=top5s, avg=[sums[0] / sums[1]], sort_ind=sort_ind.tolist(),
               decode_lengths=decode_lengths, scores=scores, targets=targets.tolist(),
               alphas=alphas, emb_grad=[decoder.embedding.weight.grad is None],
               emb_trainable=[decoder.embedding.weight.requires_grad],
               # full_att's bias shifts every pixel's score alike: a 0 gradient up to float
               # noise, which Adam turns into steps of either sign
               params=[p for n, p in decoder.named_parameters() if n != "attention.full_att.bias"])
    res["full_att_bias_grad"] = decoder.attention.full_att.bias.grad
    res["lstm_grads"] = [p.grad for p in decoder.decode_step.parameters()]
    res["encoder_grad"] = [p.grad is None for p in encoder.parameters()]
    res["batch_sizes"] = pack_padded_sequence(
        caps_sorted[:, 1:], decode_lengths, batch_first=True).batch_sizes.tolist()
    return res


def beam_search_program(torch):
    """The tutorial's caption_image_beam_search with k=3: encoder_out expanded to k beams,
    log_softmax scores added to top_k_scores.expand_as(scores), the first step's topk over
    scores[0] then over scores.view(-1), prev_word_inds by floor division, seqs and seqs_alpha
    grown by torch.cat of gathered rows, finished beams removed by list comprehensions, the best
    sequence by complete_seqs_scores.index(max(...)); run under torch.no_grad() and eval()."""
    rng = np.random.default_rng(2812)
    vocab, k, enc_size = 8, 3, 3
    decoder = _show_attend_tell(torch, vocab)
    fill_(torch, decoder, rng, scale=0.6)
    with torch.no_grad():
        decoder.fc.bias[2] += 1.2  # make <end> likely enough that beams finish
    decoder.eval()
    word_map = {"<start>": 1, "<end>": 2}
    image_feats = normal(torch, rng, 1, enc_size, enc_size, 6)
    res = {}
    with torch.no_grad():
        encoder_out = image_feats
        encoder_dim = encoder_out.size(3)
        encoder_out = encoder_out.view(1, -1, encoder_dim)
        num_pixels = encoder_out.size(1)
        encoder_out = encoder_out.expand(k, num_pixels, encoder_dim)
        k_prev_words = torch.LongTensor([[word_map["<start>"]]] * k)
        seqs = k_prev_words
        top_k_scores = torch.zeros(k, 1)
        seqs_alpha = torch.ones(k, 1, enc_size, enc_size)
        complete_seqs, complete_seqs_alpha, complete_seqs_scores = [], [], []
        step = 1
        h, c = decoder.init_hidden_state(encoder_out)
        while True:
            embeddings = decoder.embedding(k_prev_words).squeeze(1)
            awe, alpha = decoder.attention(encoder_out, h)
            alpha = alpha.view(-1, enc_size, enc_size)
            gate = decoder.sigmoid(decoder.f_beta(h))
            awe = gate * awe
            h, c = decoder.decode_step(torch.cat([embeddings, awe], dim=1), (h, c))
            scores = decoder.fc(h)
            scores = torch.nn.functional.log_softmax(scores, dim=1)
            scores = top_k_scores.expand_as(scores) + scores
            if step == 1:
                top_k_scores, top_k_words = scores[0].topk(k, 0, True, True)
            else:
                top_k_scores, top_k_words = scores.view(-1).topk(k, 0, True, True)
            prev_word_inds = torch.div(top_k_words, vocab, rounding_mode="floor")
            next_word_inds = top_k_words % vocab
            seqs = torch.cat([seqs[prev_word_inds], next_word_inds.unsqueeze(1)], dim=1)
            seqs_alpha = torch.cat([seqs_alpha[prev_word_inds], alpha[prev_word_inds].unsqueeze(1)],
                                   dim=1)
            incomplete_inds = [ind for ind, next_word in enumerate(next_word_inds)
                               if next_word != word_map["<end>"]]
            complete_inds = list(set(range(len(next_word_inds))) - set(incomplete_inds))
            if len(complete_inds) > 0:
                complete_seqs.extend(seqs[complete_inds].tolist())
                complete_seqs_alpha.extend(seqs_alpha[complete_inds].tolist())
                complete_seqs_scores.extend(top_k_scores[complete_inds])
            k -= len(complete_inds)
            if k == 0:
                break
            seqs = seqs[incomplete_inds]
            seqs_alpha = seqs_alpha[incomplete_inds]
            h = h[prev_word_inds[incomplete_inds]]
            c = c[prev_word_inds[incomplete_inds]]
            encoder_out = encoder_out[prev_word_inds[incomplete_inds]]
            top_k_scores = top_k_scores[incomplete_inds].unsqueeze(1)
            k_prev_words = next_word_inds[incomplete_inds].unsqueeze(1)
            if step > 7:
                break
            step += 1
    res["steps"] = [step]
    res["complete"] = [len(complete_seqs)]
    res["seqs"] = [w for s in complete_seqs for w in s] + [-1] + seqs.flatten().tolist()
    res["scores"] = [float(s) for s in complete_seqs_scores] + [-1.0] + \
        top_k_scores.flatten().tolist()
    if complete_seqs_scores:
        i = complete_seqs_scores.index(max(complete_seqs_scores))
        res["best"] = complete_seqs[i]
        res["best_alpha"] = np.asarray(complete_seqs_alpha[i], dtype=np.float32)
    res["alpha_shape"] = list(seqs_alpha.shape)
    res["score_type"] = [type(complete_seqs_scores[0]).__name__ if complete_seqs_scores else ""]
    return res


def butd_vqa_program(torch):
    """bottom-up-attention-vqa's BaseModel: WordEmbedding (padding_idx = ntoken, GloVe rows
    written into weight.data[:ntoken]), QuestionEmbedding (one-layer GRU, batch_first, last
    output), NewAttention over region features (weight-normed FCNets, dim=None), q_net * v_net
    joint, SimpleClassifier; instance_bce_with_logits (mean BCE times the number of answers),
    Adamax, clip_grad_norm_(0.25), compute_score_with_logits by max/scatter_; soft scores
    min(1, 0.3 * count) built from NumPy answer counts."""
    nn = torch.nn
    # the repository's FCNet uses the old hook-based weight_norm (deprecated, warns); the
    # classifier here uses the parametrization
    old_weight_norm = torch.nn.utils.weight_norm
    weight_norm = torch.nn.utils.parametrizations.weight_norm
    rng = np.random.default_rng(2813)
    B, ntoken, emb_dim, q_len, num_hid, K, v_dim, n_ans = 4, 10, 5, 6, 8, 5, 7, 6

    class FCNet(nn.Module):
        def __init__(self, dims):
            super().__init__()
            layers = []
            for i in range(len(dims) - 2):
                layers.append(old_weight_norm(nn.Linear(dims[i], dims[i + 1]), dim=None))
                layers.append(nn.ReLU())
            layers.append(old_weight_norm(nn.Linear(dims[-2], dims[-1]), dim=None))
            layers.append(nn.ReLU())
            self.main = nn.Sequential(*layers)

        def forward(self, x):
            return self.main(x)

    class WordEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(ntoken + 1, emb_dim, padding_idx=ntoken)
            self.dropout = nn.Dropout(0.0)

        def init_embedding(self, weight_init):
            assert weight_init.shape == (ntoken, emb_dim)
            self.emb.weight.data[:ntoken] = weight_init

        def forward(self, x):
            return self.dropout(self.emb(x))

    class QuestionEmbedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(emb_dim, num_hid, 1, bidirectional=False, dropout=0.0,
                              batch_first=True)
            self.num_hid = num_hid

        def init_hidden(self, batch):
            weight = next(self.parameters()).data
            return weight.new(1, batch, self.num_hid).zero_()

        def forward(self, x):
            hidden = self.init_hidden(x.size(0))
            self.rnn.flatten_parameters()
            output, hidden = self.rnn(x, hidden)
            return output[:, -1]

    class NewAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.v_proj = FCNet([v_dim, num_hid])
            self.q_proj = FCNet([num_hid, num_hid])
            self.dropout = nn.Dropout(0.0)
            self.linear = weight_norm(nn.Linear(num_hid, 1), dim=None)

        def forward(self, v, q):
            logits = self.logits(v, q)
            return nn.functional.softmax(logits, 1)

        def logits(self, v, q):
            batch, k, _ = v.size()
            v_proj = self.v_proj(v)
            q_proj = self.q_proj(q).unsqueeze(1).repeat(1, k, 1)
            joint_repr = self.dropout(v_proj * q_proj)
            return self.linear(joint_repr)

    class SimpleClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(weight_norm(nn.Linear(num_hid, 2 * num_hid), dim=None),
                                      nn.ReLU(), nn.Dropout(0.0, inplace=True),
                                      weight_norm(nn.Linear(2 * num_hid, n_ans), dim=None))

        def forward(self, x):
            return self.main(x)

    class BaseModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.w_emb, self.q_emb = WordEmbedding(), QuestionEmbedding()
            self.v_att = NewAttention()
            self.q_net, self.v_net = FCNet([num_hid, num_hid]), FCNet([v_dim, num_hid])
            self.classifier = SimpleClassifier()

        def forward(self, v, b, q, labels):
            w_emb = self.w_emb(q)
            q_emb = self.q_emb(w_emb)
            att = self.v_att(v, q_emb)
            v_emb = (att * v).sum(1)
            q_repr = self.q_net(q_emb)
            v_repr = self.v_net(v_emb)
            joint_repr = q_repr * v_repr
            return self.classifier(joint_repr), att

    def instance_bce_with_logits(logits, labels):
        assert logits.dim() == 2
        loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
        loss *= labels.size(1)
        return loss

    def compute_score_with_logits(logits, labels):
        logits = torch.max(logits, 1)[1].data
        one_hots = torch.zeros(*labels.size())
        one_hots.scatter_(1, logits.view(-1, 1), 1)
        return one_hots * labels

    model = BaseModel()
    fill_(torch, model, rng)
    model.w_emb.init_embedding(torch.from_numpy(
        rng.standard_normal((ntoken, emb_dim)).astype(np.float32)))
    with torch.no_grad():
        model.w_emb.emb.weight[ntoken].zero_()
    v = normal(torch, rng, B, K, v_dim)
    b = normal(torch, rng, B, K, 6)
    q_np = np.full((B, q_len), ntoken, np.int64)
    for i, n in enumerate([6, 4, 5, 3]):
        q_np[i, :n] = rng.integers(0, ntoken, n)
    q = torch.from_numpy(q_np)
    counts = rng.integers(0, 4, (B, n_ans))
    labels = torch.from_numpy(np.minimum(1.0, counts * 0.3).astype(np.float32))
    optim = torch.optim.Adamax(model.parameters())
    res = {"names": [n for n, _ in model.named_parameters()],
           "n_params": [sum(p.numel() for p in model.parameters() if p.requires_grad)]}
    losses, scores, norms = [], [], []
    for _ in range(3):
        pred, att = model(v, b, q, labels)
        loss = instance_bce_with_logits(pred, labels)
        loss.backward()
        norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), 0.25)))
        optim.step()
        optim.zero_grad()
        batch_score = compute_score_with_logits(pred, labels.data).sum()
        losses.append(loss.item())
        scores.append(batch_score.item())
    res.update(losses=losses, scores=scores, norms=norms, pred=pred, att=att)
    res["pad_row"] = model.w_emb.emb.weight[ntoken]
    res["params"] = list(model.parameters())
    res["state_keys"] = sorted(model.state_dict().keys())
    res["upper_bound"] = [float(labels.max(1)[0].sum())]
    model.train(False)
    with torch.no_grad():
        pred, _ = model(v, b, q, None)
    res["eval_pred"] = pred
    return res


PROGRAMS = [show_attend_tell_program, beam_search_program, butd_vqa_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 recurrences over a few Adam / Adamax steps
        "show_attend_tell_program": (1e-4, 1e-5),
        "butd_vqa_program": (1e-4, 1e-5),
    })
