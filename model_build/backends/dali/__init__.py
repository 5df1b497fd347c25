"""DALI image preprocessing models: serialization in the image's DALI release, CPU check, CPU placement."""
