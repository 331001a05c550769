"""Models: the family records, one builder for every model class, the language model, the
sequence and encoder-decoder models, initialisation, generation, pretrained folders and the
memory estimate."""
