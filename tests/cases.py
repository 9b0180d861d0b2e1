"""What several test files' cases share: Qwen3's q/k norm for a head of width 4 (γ_Q and γ_K, a negative γ in each,
so that a norm applied to the wrong side or left out shows)."""

QK_NORM = {"q_norm": (1.5, 0.5, -1.0, 2.0), "k_norm": (0.8, 1.2, 1.0, -0.6)}


def olmo_head(n: int) -> dict:
    """OLMo 2's head of width 4 cut from a layer of 4 query heads and 2 key/value heads: QK_NORM's γ as the head's
    own, over the width, with each token's share of the other heads' sums of squares (norm_rest; made-up numbers,
    one 0, so that a share read from the wrong token or left out shows)."""
    rest = {"q": [float((3 * i) % 7) + 0.5 * (i > 0) for i in range(n)], "k": [(5 * i) % 4 + 0.25 for i in range(n)]}
    return {**QK_NORM, "norm_width": True, "norm_rest": rest | {"q_width": 16, "k_width": 8}}


def with_latent(case: dict, rng, norm: bool | None = None) -> dict:
    """A case file made multi-head latent attention (DeepSeek's MLA): random W_DKV (d_in, d_c) and W_UK, W_UV of
    d_c rows in place of w_key and w_value (their widths kept), and where the case has partial rotary, DeepSeek's
    decoupled rotary key: the latent's last d_rot columns, which W_UK copies into every head's first d_rot dims
    (turned by RoPE; zeros for the values). A norm of the latent's other columns in half the cases (norm=None)."""
    options, heads = dict(case["options"]), case["options"].get("heads", 1)
    d_in, d_key, d_v = len(case["x"][0]), len(case["w_key"][0]), len(case["w_value"][0])
    g = options.get("kv_heads") or heads
    d_head = d_key // g
    fraction = options.get("rope_fraction")
    d_rot = int(d_head * fraction) if fraction is not None and "rope_base" in options else 0
    d_c = rng.randint(1, 4)  # the compressed part, then the rotary key's d_rot

    def draw(rows, cols):
        return [[round(rng.uniform(-1, 1), 2) for _ in range(cols)] for _ in range(rows)]

    w_key, w_value = draw(d_c + d_rot, d_key), draw(d_c, d_v) + [[0.0] * d_v for _ in range(d_rot)]
    for row in w_key[:d_c]:  # the compressed part reaches a head's unturned dims alone
        for head in range(g):
            row[head * d_head : head * d_head + d_rot] = [0.0] * d_rot
    for r in range(d_rot):  # the rotary key: one for every head, copied (W_UK's identity block)
        w_key[d_c + r] = [1.0 if c % d_head == r else 0.0 for c in range(d_key)]
    options["w_latent"] = draw(d_in, d_c + d_rot)
    if norm if norm is not None else rng.random() < 0.5:
        options["latent_norm"] = [round(rng.uniform(0.5, 1.5), 2) for _ in range(d_c)]
    return {**case, "w_key": w_key, "w_value": w_value, "options": options}


def with_keys_sentence(case: dict, rng, n_kv: int | None = None) -> dict:
    """A case file made cross-attention: a random other sentence x_kv (n_kv rows, 1 to 8 at random, as wide as x)
    with its own labels, which the keys and values are then made from."""
    n_kv = rng.randint(1, 8) if n_kv is None else n_kv
    x_kv = [[round(rng.uniform(-2, 2), 1) for _ in case["x"][0]] for _ in range(n_kv)]
    return {**case, "format": "attention-case/2", "x_kv": x_kv, "tokens_kv": [f"src{j}" for j in range(n_kv)]}
