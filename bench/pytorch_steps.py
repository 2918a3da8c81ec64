# PyTorch baseline for `laq bench`: the same two training steps, one thread.
# Prints JSON {"mining_ms": .., "dqn_ms": ..}; exits non-zero when torch is missing.
import json, time
import torch
import torch.nn as nn

torch.set_num_threads(1)
torch.manual_seed(0)


def median_ms(step, warmup=20, iters=300, reps=7):
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(iters):
            step()
        samples.append((time.perf_counter() - t) * 1e3 / iters)
    return sorted(samples)[len(samples) // 2]


class Forward(nn.Module):
    def __init__(self, d=2, k=8):
        super().__init__()
        self.k = k
        self.enc = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.emb = nn.Parameter(torch.randn(k, 64))
        self.dec = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, d))

    def forward(self, s):
        b = s.shape[0]
        h = self.enc(s).unsqueeze(1).expand(b, self.k, 64)
        e = self.emb.unsqueeze(0).expand(b, self.k, 64)
        return self.dec(torch.cat([h, e], 2)) + s.unsqueeze(1)


fm = Forward()
opt = torch.optim.Adam(fm.parameters(), lr=1e-3, weight_decay=1e-5)
s, s2 = torch.rand(64, 2) * 2 - 1, torch.rand(64, 2) * 2 - 1


def mining_step():
    err = ((fm(s) - s2.unsqueeze(1)) ** 2).sum(2)
    idx = err.detach().argmin(1, keepdim=True)
    loss = err.gather(1, idx).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def mlp():
    return nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 8))


q, qt = mlp(), mlp()
qt.load_state_dict(q.state_dict())
qopt = torch.optim.Adam(q.parameters(), lr=1e-4)
xs, xs2 = torch.rand(16, 4), torch.rand(16, 4)
a = torch.randint(0, 8, (16, 1))
r = (torch.arange(16) % 7 == 0).float().unsqueeze(1)
notdone = 0.99 * (1 - r)


def dqn_step():
    with torch.no_grad():
        best = q(xs2).argmax(1, keepdim=True)
        y = (r + notdone * qt(xs2).gather(1, best)).clamp(0, 1)
    loss = 0.5 * ((q(xs).gather(1, a) - y) ** 2).mean()
    qopt.zero_grad()
    loss.backward()
    qopt.step()


print(json.dumps({"mining_ms": median_ms(mining_step), "dqn_ms": median_ms(dqn_step)}))
