"""The formats on disk, declared once: a checkpoint or pretrained folder (file names, atomic
write, manifest, verified reads), weights in safetensors, and the layout of a run folder."""
