"""What several test files' cases share: Qwen3's q/k norm for a head of width 4 (γ_Q and γ_K, a negative γ in each,
so that a norm applied to the wrong side or left out shows)."""

QK_NORM = {"q_norm": (1.5, 0.5, -1.0, 2.0), "k_norm": (0.8, 1.2, 1.0, -0.6)}
