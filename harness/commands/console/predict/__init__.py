"""What `predict` prints: its scaling, memory, steps per cap, published checks and the answer."""
