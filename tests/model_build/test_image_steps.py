"""The model step of an image-embedding entry (model_build/recipes/image_steps.py) on a convolutional network,
whose pooled output keeps its 1 x 1 map: one vector per image, normalised over the vector."""
import torch
import transformers

from model_build.recipes.image_steps import EmbedderModel, image_embedding


def _resnet() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")
    return transformers.ResNetModel(config).eval()


def test_a_resnet_embedding_is_one_vector_per_image():
    net, pixels = _resnet(), torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        pooled = net(pixel_values=pixels).pooler_output
        vector = image_embedding(net, pixels)
    assert list(pooled.shape) == [2, 16, 1, 1]  # what transformers gives (and pipeline(pool=True) answers)
    assert list(vector.shape) == [2, 16] and torch.equal(vector, pooled.flatten(1))


def test_normalize_makes_a_unit_vector_of_the_whole_embedding():
    # Before the flattening, normalize over the trailing 1 x 1 made every value its sign: all +-1, norm 4.
    net, pixels = _resnet(), torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        normalised = EmbedderModel(net, normalize=True)(pixels)
        plain = EmbedderModel(net, normalize=False)(pixels)
    assert torch.allclose(normalised.norm(dim=-1), torch.ones(2))
    assert torch.allclose(normalised, plain / plain.norm(dim=-1, keepdim=True))
    assert not torch.all(normalised.abs() == 1)
