"""Neural-network pieces, one per paper concept: attention kinds (dot, Transformer-XL relative,
Shaw, score functions), the connection × combiner seam (residual, SDU, highway, gated, GTrXL
gates), LocalRNN, memory, norms, positions, the FFN, and :mod:`.reference`, the papers'
equations written literally (the oracle of every fast module)."""
