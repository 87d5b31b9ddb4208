"""Activation backward: Relu, LeakyRelu, Sigmoid, Tanh, and Softmax inside a network."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgecnn.ops.activation import LeakyReluAttrs, SoftmaxAttrs, sigmoid_of, softmax, softmax_axes
from edgecnn.train.registry import Context, Forward, register_grad


def relu_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    positive = x > 0
    return Forward((np.where(positive, x, np.zeros((), x.dtype)),), positive)


def relu_backward(attrs: object, positive: np.ndarray, dy: np.ndarray, needed: Sequence[bool]) -> list:
    return [np.where(positive, dy, np.zeros((), dy.dtype))]


register_grad("Relu", relu_forward, relu_backward)


def leaky_forward(attrs: LeakyReluAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    positive = x >= 0
    return Forward((np.where(positive, x, x * x.dtype.type(attrs.alpha)),), positive)


def leaky_backward(
    attrs: LeakyReluAttrs, positive: np.ndarray, dy: np.ndarray, needed: Sequence[bool]
) -> list:
    return [np.where(positive, dy, dy * dy.dtype.type(attrs.alpha))]


register_grad("LeakyRelu", leaky_forward, leaky_backward)


def sigmoid_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    y = sigmoid_of(x).astype(x.dtype)
    return Forward((y,), y)


def sigmoid_backward(attrs: object, y: np.ndarray, dy: np.ndarray, needed: Sequence[bool]) -> list:
    return [dy * y * (1 - y)]


register_grad("Sigmoid", sigmoid_forward, sigmoid_backward)


def tanh_forward(attrs: object, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    y = np.tanh(x)
    return Forward((y,), y)


def tanh_backward(attrs: object, y: np.ndarray, dy: np.ndarray, needed: Sequence[bool]) -> list:
    return [dy * (1 - y * y)]


register_grad("Tanh", tanh_forward, tanh_backward)


def softmax_forward(attrs: SoftmaxAttrs, inputs: Sequence[np.ndarray | None], ctx: Context) -> Forward:
    x = inputs[0]
    assert x is not None
    y = softmax(attrs, x)
    return Forward((y,), y)


def softmax_backward(attrs: SoftmaxAttrs, y: np.ndarray, dy: np.ndarray, needed: Sequence[bool]) -> list:
    axes = softmax_axes(attrs, y.ndim)
    return [y * (dy - (dy * y).sum(axis=axes, keepdims=True))]


register_grad("Softmax", softmax_forward, softmax_backward)
