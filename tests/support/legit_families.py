"""Families of honest replies, generated: text that is language (or a format) however odd.

Each family makes one kind of reply a healthy model gives and a token-salad rule could
mistake for salad; a seed varies its values, lengths and layout (about 20 members each).
The text goes in the reasoning, the content or a tool call's argument values across a
family. None of them may be called `garbled`: the rule's thresholds are set against these
families, never the other way round.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.legit_corpus import LegitReply

MEMBERS = 20


@dataclass(frozen=True)
class ScriptedReply(LegitReply):
    """A reply to a request whose own text was in other scripts (`params["scripts"]`)."""

    scripts: tuple[str, ...] = ()

    @property
    def params(self) -> dict[str, Any]:
        params = dict(super().params)
        if self.scripts:
            params["scripts"] = list(self.scripts)
        return params


def _rng(family: str, seed: int) -> random.Random:
    return random.Random(f"legit/{family}/{seed}")


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def place(family: str, seed: int, text: str, scripts: tuple[str, ...] = ()) -> LegitReply:
    """The text as content, as reasoning, or as a tool call's argument value, by seed."""
    name = f"{family} {seed}"
    where = seed % 3
    if where == 0:
        return ScriptedReply(name, content=text, reasoning="Answer the question.",
                             scripts=scripts)
    if where == 1:
        return ScriptedReply(name, reasoning=text, content="Done: see above.", scripts=scripts)
    return ScriptedReply(
        name, reasoning="Send it to the account owner.",
        tool_calls=[_call("send_email", account_id="XEHM4B", subject=f"{family} ({seed})",
                          body=text)],
        finish_reason="tool_calls", expects_tool_call=True, scripts=scripts)


def _draw(rng: random.Random, pool: list[str], low: int, high: int) -> list[str]:
    """Sentences from the pool, each at most twice (a writer does not say the same thing
    over and over: that is a loop, another rule's business)."""
    deck = rng.sample(pool, len(pool)) + rng.sample(pool, len(pool))
    return deck[:min(rng.randint(low, high), len(deck))]


def _paragraphs(rng: random.Random, picked: list[str], joiner: str = " ") -> str:
    out, para = [], []
    for s in picked:
        para.append(s)
        if rng.random() < 0.2:
            out.append(joiner.join(para))
            para = []
    if para:
        out.append(joiner.join(para))
    return "\n\n".join(out)


# ------------------------------------------------------------------------- Chinese

ZH = [
    "这个问题的关键在于请求之间是否共享了同一块缓存。",
    "我们先确认账户的当前套餐，然后再执行升级操作。",
    "如果用户希望在计费周期结束时取消订阅，就需要先确认生效时间。",
    "在高并发的情况下，服务器可能会出现响应变慢的现象。",
    "根据日志记录，第{n}个请求在{t}秒后才返回结果。",
    "升级完成后，系统会自动发送确认邮件给账户所有者。",
    "请注意，按比例计算的费用会出现在下一张发票上。",
    "为了保证结果的稳定性，建议把温度设置为零。",
    "总的来说，这次测试共发送了{n}个请求，全部正常完成。",
    "用户的问题其实包含两个步骤：先升级，再取消。",
    "我认为最稳妥的做法是分两轮对话完成这些操作。",
    "如果出现错误，应当如实告诉用户，而不是假装已经完成。",
]


def _zh(rng: random.Random, sentences: list[str], low: int, high: int) -> str:
    picked = [s.format(n=rng.randint(2, 4096), t=rng.randint(1, 90))
              for s in _draw(rng, sentences, low, high)]
    out, para = [], ""
    for s in picked:
        para += s
        if rng.random() < 0.25:
            out.append(para)
            para = ""
    return "\n\n".join([*out, para] if para else out)


def chinese(seed: int) -> LegitReply:
    rng = _rng("chinese", seed)
    return place("chinese", seed, _zh(rng, ZH, 2, 24))


ZH_EN = [
    "vLLM 的 PagedAttention 把 KV cache 切成固定大小的 block，按需分配显存。",
    "开启 CUDA Graph 之后，decode 阶段的 kernel launch 开销明显下降。",
    "DeepSeek-V4 使用 C128A 稀疏注意力，metadata 的 row stride 必须和 capture 时一致。",
    "在 --max-num-seqs={n} 的配置下，batch 里最多有{n}个请求同时 decode。",
    "如果 prefix caching 命中，prefill 只需要计算新的 token，TTFT 会缩短到{t}ms左右。",
    "我们用 DSpark 做 speculative decoding，acceptance rate 大约是{t}%。",
    "FlashMLA 的 kernel 要求 block_size=64，否则会报 RuntimeError。",
    "把 gpu_memory_utilization 设为0.9，给 CUDA context 和 NCCL 留一些空间。",
    "建议用 tensor parallel(TP={n}) 加 data parallel 的组合部署。",
    "这个 bug 在 vLLM 0.28.0 里已经通过 PR #51318 修复了。",
    "用 nvidia-smi 看一下 GPU 利用率，再用 py-spy dump 查看 EngineCore 的调用栈。",
    "Triton kernel 的 autotune 结果会缓存在 ~/.triton/cache 目录下。",
]


def zh_en_tech(seed: int) -> LegitReply:
    rng = _rng("zh_en_tech", seed)
    return place("zh_en_tech", seed, _zh(rng, ZH_EN, 2, 24))


# --------------------------------------------------------------- Japanese, Korean

JA = [
    "vLLMのPagedAttentionは、KVキャッシュを固定サイズのブロックに分割します。",
    "同時リクエスト数が{n}を超えると、レイテンシが少し増えることがあります。",
    "まずアカウントのプランを確認してから、アップグレードを実行します。",
    "キャンセルの時期について、お客様に確認する必要があります。",
    "CUDAグラフを有効にすると、デコードのオーバーヘッドが小さくなります。",
    "このバグはバージョン0.28.0で修正されました。",
    "ログによると、{n}番目のリクエストは{t}秒後に完了しました。",
    "東京のデータセンターでは、ＧＰＵサーバーを{n}台運用しています。",
    "ありがとうございます。ほかにご質問があれば、お気軽にどうぞ。",
]
KO = [
    "vLLM은 KV 캐시를 고정 크기 블록으로 나누어 GPU 메모리를 관리합니다.",
    "동시 요청이 {n}개를 넘으면 응답 시간이 조금 늘어날 수 있습니다.",
    "먼저 계정의 요금제를 확인한 다음 업그레이드를 진행하겠습니다.",
    "취소 시점에 대해서는 고객님께 다시 확인해야 합니다.",
    "CUDA 그래프를 켜면 디코딩 단계의 오버헤드가 줄어듭니다.",
    "이 문제는 0.28.0 버전에서 수정되었습니다.",
    "로그에 따르면 {n}번째 요청은 {t}초 후에 완료되었습니다.",
    "大韓民國의 서울(首都)에 있는 데이터 센터에서 서버 {n}대를 운영합니다.",
    "감사합니다. 다른 질문이 있으시면 언제든지 말씀해 주세요.",
]


def japanese_korean(seed: int) -> LegitReply:
    rng = _rng("japanese_korean", seed)
    sentences = JA if seed % 2 == 0 else KO
    picked = [s.format(n=rng.randint(2, 512), t=rng.randint(1, 60))
              for s in _draw(rng, sentences, 2, 40)]
    text = ("" if seed % 2 == 0 else " ").join(picked)
    return place("japanese_korean", seed, text)


# ---------------------------------------------------------------------------- code

PY = '''```python
def {fn}({arg}: list[dict[str, Any]], limit: int = {n}) -> dict[str, int]:
    """Count the {what} of each {arg} entry, at most `limit` of them."""
    counts: dict[str, int] = {{}}
    for item in {arg}[:limit]:
        key = item.get("{key}") or "unknown"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
```
'''
RUST = '''```rust
pub fn {fn}({arg}: &[u32], window: usize) -> Vec<f64> {{
    let mut out = Vec::with_capacity({arg}.len().saturating_sub(window) + 1);
    for chunk in {arg}.windows(window) {{
        let sum: u64 = chunk.iter().map(|&x| x as u64).sum();
        out.push(sum as f64 / window as f64);
    }}
    out
}}
```
'''
SQL = '''```sql
SELECT a.account_id, a.plan, COUNT(r.id) AS {what}, MAX(r.created_at) AS last_seen
FROM accounts AS a
LEFT JOIN requests AS r ON r.account_id = a.account_id AND r.status = '{key}'
WHERE a.plan IN ('pro', 'business') AND a.created_at >= NOW() - INTERVAL '{n} days'
GROUP BY a.account_id, a.plan
HAVING COUNT(r.id) > {n}
ORDER BY {what} DESC;
```
'''
SHELL = '''```bash
#!/usr/bin/env bash
set -euo pipefail
for f in /var/log/{key}/*.log; do
  grep -E 'ERROR|WARN' "$f" | awk '{{print $1, $2, $5}}' | sort | uniq -c | sort -rn | head -n {n}
done
docker run --rm --gpus all -p 8000:8000 -e VLLM_USE_V1=1 vllm/vllm-openai:v0.28.0 \\
  --model deepseek-ai/DeepSeek-V4-Flash --max-num-seqs {n} --tensor-parallel-size 8
find . -name '*.pyc' -delete && rm -rf build/ dist/ *.egg-info
```
'''
REGEXES = [
    r"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*)@(?:[a-z0-9]"
    r"(?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$",
    r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?)\s+(?P<lvl>[A-Z]+)\s+\[(?P<mod>[\w.]+)\]",
    r"(?<![A-Za-z0-9])[A-Z0-9]{6,12}(?![A-Za-z0-9])",
    r"^\s*(?:https?|ftp)://[^\s/$.?#].[^\s]*$",
    r"\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b",
    r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$",
    r"<\|[A-Za-z0-9_:.\-]{1,48}\|>|[^\x00-\x7f]{2,}",
]


def code(seed: int) -> LegitReply:
    rng = _rng("code", seed)
    fill = {"fn": rng.choice(["count_by_status", "rolling_mean", "summarise", "bucketize"]),
            "arg": rng.choice(["records", "samples", "rows", "events"]),
            "what": rng.choice(["requests", "failures", "retries"]),
            "key": rng.choice(["status", "plan", "region", "vllm"]),
            "n": rng.randint(2, 500)}
    blocks = [PY, RUST, SQL, SHELL]
    parts = [rng.choice(blocks).format(**fill) for _ in range(rng.randint(1, 4))]
    regexes = rng.sample(REGEXES, rng.randint(1, 4))
    parts.append("Regexes:\n\n" + "\n".join(f"- `{r}`" for r in regexes))
    rng.shuffle(parts)
    return place("code", seed, "Here is the code.\n\n" + "\n".join(parts))


# ------------------------------------------------------------- formats and data

def minified_json(seed: int) -> LegitReply:
    rng = _rng("minified_json", seed)
    rows = [{"id": str(uuid.UUID(int=rng.getrandbits(128))),
             "account_id": "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", k=6)),
             "plan": rng.choice(["free", "pro", "business", "enterprise"]),
             "seats": rng.randint(1, 500), "mrr": round(rng.uniform(0, 9999), 2),
             "tags": rng.sample(["beta", "eu", "us", "gpu", "trial", "vip"], 2),
             "meta": {"region": rng.choice(["eu-west-1", "us-east-2"]),
                      "sig": hashlib.sha1(str(rng.random()).encode()).hexdigest()[:12]}}
            for _ in range(rng.randint(3, 60))]
    return place("minified_json", seed, json.dumps(rows, separators=(",", ":")))


def base64_blobs(seed: int) -> LegitReply:
    rng = _rng("base64_blobs", seed)
    parts = []
    for _ in range(rng.randint(1, 4)):
        blob = base64.b64encode(rng.randbytes(rng.randint(24, 3000))).decode()
        if rng.random() < 0.3:
            blob = base64.urlsafe_b64encode(blob.encode()).decode().rstrip("=")
        if rng.random() < 0.5:
            blob = "\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
        parts.append(rng.choice([
            f"The certificate body is:\n\n```\n{blob}\n```",
            f"Set `Authorization: Basic {blob[:60]}` and the payload `{blob}`.",
            f'{{"image": "data:image/png;base64,{blob}"}}',
        ]))
    return place("base64_blobs", seed, "\n\n".join(parts))


def hashes_uuids(seed: int) -> LegitReply:
    rng = _rng("hashes_uuids", seed)
    lines = []
    for i in range(rng.randint(3, 80)):
        data = rng.randbytes(16)
        lines.append(rng.choice([
            f"{hashlib.sha256(data).hexdigest()}  wheels/vllm-0.28.{i}-cp312-linux_x86_64.whl",
            f"request {uuid.UUID(bytes=data)} -> replica {rng.randint(0, 7)}",
            f"commit {hashlib.sha1(data).hexdigest()} ({hashlib.md5(data).hexdigest()[:7]})",
            f"- {uuid.UUID(bytes=data)}, {uuid.UUID(int=rng.getrandbits(128))}",
            f"sha512: {hashlib.sha512(data).hexdigest()}",
        ]))
    return place("hashes_uuids", seed, "\n".join(lines))


def markdown_tables(seed: int) -> LegitReply:
    rng = _rng("markdown_tables", seed)
    header = "| account | plan | status | seats | region | renews |\n|---|---|---|---:|---|---|"
    rows = ["| {} | {} | {} | {} | {} | 2026-{:02d}-{:02d} |".format(
        "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", k=6)),
        rng.choice(["free", "pro", "business", "enterprise"]),
        rng.choice(["active", "suspended", "cancelled", "trial"]),
        rng.randint(1, 400), rng.choice(["eu-west", "us-east", "ap-south"]),
        rng.randint(1, 12), rng.randint(1, 28)) for _ in range(rng.randint(3, 120))]
    text = "Here are the accounts:\n\n" + header + "\n" + "\n".join(rows)
    if seed % 4 == 1:
        text = text.replace("| plan |", "| 套餐 |").replace("| status |", "| 状态 |")
    return place("markdown_tables", seed, text)


MATH = [
    r"The attention weights are $\alpha_{{ij}} = \frac{{\exp(q_i^\top k_j / \sqrt{{d}})}}"
    r"{{\sum_{{l}} \exp(q_i^\top k_l / \sqrt{{d}})}}$, so $\sum_j \alpha_{{ij}} = 1$.",
    "By Clopper–Pearson, with 0 failures in n = {n} trials the 95% upper bound is "
    "1 − 0.05^(1/n) ≈ 3/n = {p:.4f}.",
    "Let λ = {n}/s be the arrival rate and μ the service rate; the queue is stable when "
    "ρ = λ/μ < 1, and the mean wait is ρ/(μ − λ).",
    r"$$\mathcal{{L}}(\theta) = -\sum_{{t=1}}^{{T}} \log p_\theta(x_t \mid x_{{<t}}) "
    r"+ \lambda \lVert \theta \rVert_2^2$$",
    "∀ε > 0 ∃δ > 0: |x − a| < δ ⇒ |f(x) − f(a)| < ε. Here Δt = {n} μs and σ² = 0.{n}.",
    r"Since $\nabla_\theta J = \mathbb{{E}}[\nabla_\theta \log \pi_\theta(a|s) Q(s,a)]$, "
    r"the gradient estimate has variance $O(1/N)$ for $N = {n}$ samples.",
    "Ω(n log n) comparisons are needed; the Γ function gives Γ(n+1) = n! and "
    "β = Γ(a)Γ(b)/Γ(a+b). Angles: θ = π/4, φ ∈ [0, 2π).",
    "Resistance R = ρL/A = {n} kΩ; the current is I = V/R ≈ {p:.3f} mA at 5 V.",
]


def math(seed: int) -> LegitReply:
    rng = _rng("math", seed)
    parts = [rng.choice(MATH).format(n=rng.randint(2, 999), p=rng.random())
             for _ in range(rng.randint(2, 30))]
    return place("math", seed, "\n\n".join(parts))


def identifiers(seed: int) -> LegitReply:
    rng = _rng("identifiers", seed)
    words = ["request", "token", "cache", "block", "table", "scheduler", "manager",
             "sparse", "attention", "metadata", "builder", "capacity", "stride", "decode"]
    lines = []
    for _ in range(rng.randint(5, 80)):
        ws = rng.sample(words, rng.randint(3, 6))
        lines.append(rng.choice([
            "_".join(ws),
            ws[0] + "".join(w.capitalize() for w in ws[1:]),
            "".join(w.capitalize() for w in ws) + "Factory",
            "org.apache." + ".".join(ws) + "." + "".join(w.capitalize() for w in ws[:2]),
            "/usr/lib/python3.12/site-packages/vllm/" + "/".join(ws) + ".py",
            "https://github.com/vllm-project/vllm/blob/main/vllm/" + "/".join(ws) + ".py#L"
            + str(rng.randint(1, 2000)),
            "C:\\Users\\build\\" + "\\".join(ws) + ".dll",
            "--" + "-".join(ws) + "=" + str(rng.randint(0, 9)),
            "VLLM_" + "_".join(w.upper() for w in ws),
        ]))
    text = "The names that matter:\n\n" + "\n".join(f"- `{x}`" for x in lines)
    return place("identifiers", seed, text)


EMOJI = ["🚀", "✅", "❌", "🔥", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "😀", "🤔", "⚠️", "📦", "🧪", "💡"]


def emoji(seed: int) -> LegitReply:
    rng = _rng("emoji", seed)
    lines = [rng.choice([
        "{e} Deploy finished in {n} s {e}",
        "Great question! {e}{e} The upgrade is done.",
        "- {e} step {n}: check the account",
        "{e}{e}{e}",
        "升级完成 {e} 共 {n} 个请求",
        "Status: {e} OK | {e} {n} failed",
    ]).format(e=rng.choice(EMOJI), n=rng.randint(1, 99)) for _ in range(rng.randint(3, 60))]
    return place("emoji", seed, "\n".join(lines))


def logs(seed: int) -> LegitReply:
    rng = _rng("logs", seed)
    lines = []
    for i in range(rng.randint(5, 120)):
        ts = f"2026-08-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:" \
             f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
        lines.append(rng.choice([
            f"{ts} INFO  [vllm.engine.async_llm] Added request chatcmpl-{uuid.UUID(int=i)}",
            f"(EngineCore_DP0 pid={rng.randint(100, 9999)}) WARNING {ts} [scheduler.py:"
            f"{rng.randint(1, 999)}] Preempted {rng.randint(1, 9)} requests",
            f'127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" '
            f"{rng.choice([200, 200, 200, 429, 500])} OK",
            f"{ts} ERROR worker_{rng.randint(0, 7)} CUDA error: an illegal memory access was "
            f"encountered (ptr=0x{rng.getrandbits(48):012x})",
        ]))
    trace = """Traceback (most recent call last):
  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 711, in run_engine_core
    engine_core.run_busy_loop()
  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1830
    torch.cuda.synchronize()
RuntimeError: CUDA error: device-side assert triggered
  at java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)
  at org.example.billing.PlanService.changePlan(PlanService.java:88)"""
    if seed % 2:
        lines.insert(rng.randint(0, len(lines)), trace)
    return place("logs", seed, "```\n" + "\n".join(lines) + "\n```")


# --------------------------------------------------------------------- prose

FR = ["Le compte a été mis à niveau vers l'offre Business.",
      "Souhaitez-vous que la résiliation prenne effet immédiatement ou à la fin de la période ?",
      "Le serveur répond plus lentement lorsque plus de {n} requêtes sont en cours.",
      "Il faut d'abord vérifier que l'abonnement est actif, puis appliquer le changement.",
      "La facture affichera le montant calculé au prorata pour le reste du mois.",
      "Nous avons corrigé le problème dans la version 0.28.0, publiée le {n} août."]
DE = ["Das Konto wurde auf den Business-Tarif umgestellt.",
      "Soll die Kündigung sofort oder zum Ende der Laufzeit wirksam werden?",
      "Die Haftpflichtversicherungsgesellschaft bestätigte die Vertragsänderung.",
      "Bei mehr als {n} gleichzeitigen Anfragen steigt die Antwortzeit deutlich an.",
      "Die Rechnung enthält den anteilig berechneten Betrag für den Rest des Monats.",
      "Zuerst prüfen wir, ob das Abonnement aktiv ist; danach ändern wir den Tarif."]
ES = ["La cuenta se ha actualizado al plan Business.",
      "¿Desea que la cancelación sea inmediata o al final del período de facturación?",
      "El servidor responde más despacio cuando hay más de {n} solicitudes en curso.",
      "Primero comprobamos que la suscripción esté activa y después cambiamos el plan.",
      "La factura mostrará el importe prorrateado por el resto del mes.",
      "Corregimos el error en la versión 0.28.0; gracias por avisarnos, señor Núñez."]
RU = ["Аккаунт переведён на тариф Business.",
      "Отменить подписку сразу или в конце расчётного периода?",
      "Когда одновременно выполняется больше {n} запросов, сервер отвечает медленнее.",
      "Сначала проверим, что подписка активна, затем изменим тариф через change_plan.",
      "В счёте будет указана сумма, рассчитанная пропорционально остатку месяца.",
      "Ошибка исправлена в версии vLLM 0.28.0 (PR #51318); KV-кэш больше не смешивается."]


def european_prose(seed: int) -> LegitReply:
    rng = _rng("european_prose", seed)
    language = seed % 4
    sentences = [FR, DE, ES, RU][language]
    picked = [s.format(n=rng.randint(2, 300)) for s in _draw(rng, sentences, 2, 12)]
    scripts = ("Cyrillic",) if language == 3 else ()
    return place("european_prose", seed, _paragraphs(rng, picked), scripts=scripts)


# ------------------------------------------------------------- lists and filler

KEYWORDS = ["vllm", "cuda", "kv-cache", "paged-attention", "deepseek", "moe", "nccl",
            "speculative-decoding", "dspark", "triton", "fp8", "flashmla", "tensor-parallel",
            "prefix-caching", "continuous-batching", "throughput", "latency", "gpu", "h200",
            "inference", "benchmark", "qualification", "regression", "soak-test"]


def keyword_lists(seed: int) -> LegitReply:
    rng = _rng("keyword_lists", seed)
    words = rng.sample(KEYWORDS, rng.randint(6, len(KEYWORDS)))
    style = seed % 5
    if style == 0:
        text = "Tags: " + ", ".join(words)
    elif style == 1:
        text = " ".join("#" + w.replace("-", "") for w in words)
    elif style == 2:
        text = "Keywords:\n" + "\n".join(f"- {w}" for w in words)
    elif style == 3:
        text = "keywords = " + json.dumps(words)
    else:
        text = " · ".join(w.replace("-", " ").title() for w in words)
    return place("keyword_lists", seed, text)


LOREM = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud "
         "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat duis aute "
         "irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat "
         "nulla pariatur excepteur sint occaecat cupidatat non proident sunt in culpa qui "
         "officia deserunt mollit anim id est laborum").split()


def lorem_ipsum(seed: int) -> LegitReply:
    rng = _rng("lorem_ipsum", seed)
    sentences = []
    for _ in range(rng.randint(2, 60)):
        words = [rng.choice(LOREM) for _ in range(rng.randint(5, 16))]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "?", ";"]))
    text = " ".join(sentences)
    if seed % 2:
        text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " + text
    return place("lorem_ipsum", seed, text)


# ------------------------------------------------------------ close negatives

GREETINGS = [("Russian", "привет"), ("Arabic", "مرحبا"), ("Hindi", "नमस्ते"),
             ("Japanese", "こんにちは"), ("Korean", "안녕하세요"), ("Greek", "γεια σου"),
             ("Hebrew", "שלום"), ("Thai", "สวัสดี"), ("Chinese", "你好"),
             ("Armenian", "բարեւ"), ("Georgian", "გამარჯობა"), ("Bengali", "নমস্কার"),
             ("Ukrainian", "привіт"), ("Persian", "سلام"), ("Tamil", "வணக்கம்")]


def greetings(seed: int) -> LegitReply:
    """'Hello' in many languages: many scripts in a few lines, each a whole word."""
    rng = _rng("greetings", seed)
    picked = rng.sample(GREETINGS, rng.randint(5, len(GREETINGS)))
    style = seed % 3
    if style == 0:
        text = "\n".join(f"- {lang}: {word}" for lang, word in picked)
    elif style == 1:
        text = "Hello in other languages: " + ", ".join(f"{w} ({lang})" for lang, w in picked)
    else:
        text = "| language | hello |\n|---|---|\n" + "\n".join(
            f"| {lang} | {word} |" for lang, word in picked)
    return place("greetings", seed, text)


GERMAN_LONG = ["Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz",
               "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
               "Grundstücksverkehrsgenehmigungszuständigkeitsübertragungsverordnung",
               "Kraftfahrzeughaftpflichtversicherung", "Arbeiterunfallversicherungsgesetz"]


def long_words(seed: int) -> LegitReply:
    """Long compounds named in prose: long words, but few and far between."""
    rng = _rng("long_words", seed)
    lines = [f"{rng.choice(['Ein Beispiel', 'Auch', 'Dazu kommt'])}: "
             f"{rng.choice(GERMAN_LONG)} ist ein zusammengesetztes Substantiv mit "
             f"{rng.randint(30, 80)} Buchstaben, das in Gesetzestexten vorkommt."
             for _ in range(rng.randint(1, 12))]
    return place("long_words", seed, "\n\n".join(lines))


def passwords(seed: int) -> LegitReply:
    """Generated passwords and keys: random characters, one per line of a list."""
    rng = _rng("passwords", seed)
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789!@#$%^&*-_=+?"
    if seed % 3 == 2:
        alphabet = string.ascii_letters + string.digits + string.punctuation
    width = rng.choice([12, 16, 20, 24, 32, 48, 64])
    items = ["".join(rng.choices(alphabet, k=width)) for _ in range(rng.randint(4, 40))]
    if seed % 2:
        body = "```\n" + "\n".join(items) + "\n```"
    else:
        body = "\n".join(f"{i}. `{item}`" for i, item in enumerate(items, 1))
    return place("passwords", seed, f"Here are {len(items)} passwords of {width} characters:"
                                    f"\n\n{body}")


def answers(seed: int) -> LegitReply:
    """A few words asked for again and again: a yes/no quiz, a list of plans."""
    rng = _rng("answers", seed)
    vocab = rng.choice([["yes", "no"], ["heads", "tails"], ["pro", "business"],
                        ["true", "false", "unknown"]])
    items = [rng.choice(vocab) for _ in range(rng.randint(10, 200))]
    text = rng.choice([", ".join(items), "\n".join(f"{i + 1}. {x}" for i, x in
                                                   enumerate(items)), " ".join(items)])
    return place("answers", seed, text)


FAMILIES: dict[str, Callable[[int], LegitReply]] = {
    "chinese": chinese, "zh_en_tech": zh_en_tech, "japanese_korean": japanese_korean,
    "code": code, "minified_json": minified_json, "base64_blobs": base64_blobs,
    "hashes_uuids": hashes_uuids, "markdown_tables": markdown_tables, "math": math,
    "identifiers": identifiers, "emoji": emoji, "logs": logs,
    "european_prose": european_prose, "keyword_lists": keyword_lists,
    "lorem_ipsum": lorem_ipsum, "greetings": greetings, "long_words": long_words,
    "passwords": passwords, "answers": answers,
}


def family_replies(members: int = MEMBERS) -> list[LegitReply]:
    """Every family's replies, `members` seeds each."""
    return [make(seed) for make in FAMILIES.values() for seed in range(members)]
