"""Runtime services every layer above may use: this process's place in a run (rank, world,
collectives), its device, seeds and autocast precision, what the hardware can do fast, and how
several processes hold one model (DDP, FSDP)."""
