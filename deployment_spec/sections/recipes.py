"""Names of the built-in model recipes and the backends each can feed.

model_build implements them (torch lives there); the spec only needs the names,
so validation runs without importing torch.
"""
EXPORTABLE = ("tensorrt", "onnxruntime", "pytorch")
PYTHON = ("python",)

BUILTIN: dict[str, tuple[str, ...]] = {
    # The models of the reference articles.
    "bert-base": EXPORTABLE,
    "bert-large": EXPORTABLE,
    "roberta-base": EXPORTABLE,
    "roberta-large": EXPORTABLE,
    "resnet50": EXPORTABLE,
    "t5-small": PYTHON,
    # Tokenizing preprocessor for a text ensemble (Python backend).
    "text-preprocess": PYTHON,
    # Tiny variants with the same graph shapes, for tests and quick CPU builds.
    "tiny-bert": EXPORTABLE,
    "tiny-roberta": EXPORTABLE,
    "tiny-resnet": EXPORTABLE,
    "tiny-t5": PYTHON,
    # Any transformers checkpoint directory (``weights:``) through the Auto classes
    # (AutoModelForSequenceClassification / AutoModelForImageClassification): DistilBERT, DeBERTa,
    # ViT, ConvNeXt... with no code of the user's.
    "hf-sequence-classification": EXPORTABLE,
    "hf-image-classification": EXPORTABLE,
    # The model step of a ``task:`` (deployment_spec/sections/tasks.py), usable on their own too: per-token logits,
    # the sentence embedding (the checkpoint's pooling, Dense and Normalize modules inside the graph),
    # start and end logits.
    "hf-token-classification": EXPORTABLE,
    "hf-sentence-embedding": EXPORTABLE,
    "hf-question-answering": EXPORTABLE,
    # The model step of image embeddings: get_image_features (CLIP, SigLIP) or the pooled output (DINOv2).
    "hf-image-embedding": EXPORTABLE,
    # The model step of object detection: logits and boxes per query (pred_boxes, relative to the image).
    "hf-object-detection": EXPORTABLE,
    # The model steps of the audio tasks: a classifier's logits; a CTC model's logits and frames per row.
    "hf-audio-classification": EXPORTABLE,
    "hf-ctc": EXPORTABLE,
    # A generating task's one model (text-generation, text2text-generation): the checkpoint decoded with
    # transformers in the Python backend, streaming when the task says so.
    "hf-generate": PYTHON,
}
# Recipes that are nothing without a checkpoint: their architecture is the checkpoint's config.json.
NEEDS_WEIGHTS = ("hf-sequence-classification", "hf-image-classification", "hf-token-classification",
                 "hf-sentence-embedding", "hf-question-answering", "hf-audio-classification", "hf-ctc",
                 "hf-object-detection", "hf-image-embedding", "hf-generate")
