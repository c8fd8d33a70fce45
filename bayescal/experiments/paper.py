"""Published numbers of Kull et al. (2019), Tables 1-4, for side-by-side reports.

Copied from the paper (via the project's paper card). Table 2 has no row
labels in the paper; its rows are taken to follow Table 1's classifier order.
"""

from __future__ import annotations

__all__ = [
    "DNN_COLUMNS",
    "DNN_TABLE_ROWS",
    "TABLE1",
    "TABLE1_FRIEDMAN_P",
    "TABLE2",
    "TABLE2_FRIEDMAN_P",
    "TABLE3",
    "TABLE4",
    "UCI_COLUMNS",
]

#: Method names (bayescal.experiments.calibrators) of the columns of Tables 1-2.
UCI_COLUMNS: tuple[str, ...] = (
    "dir_l2", "beta", "freq_bin", "isotonic", "width_bin", "temp", "uncal",
)  # fmt: skip

_CLF = ("adas", "forest", "knn", "lda", "logistic", "mlp", "nbayes", "qda",
        "svc-linear", "svc-rbf", "tree")  # fmt: skip

#: Table 1: average ranks for p-cw-ECE; last entry "average".
TABLE1: dict[str, tuple[float, ...]] = dict(zip(_CLF + ("average",), (
    (2.4, 3.2, 4.1, 4.2, 3.9, 5.0, 5.2),
    (3.5, 2.3, 5.7, 3.0, 3.6, 5.0, 5.0),
    (2.5, 4.0, 4.5, 2.1, 3.2, 5.8, 6.0),
    (1.9, 3.1, 5.8, 3.0, 3.5, 5.0, 5.8),
    (2.2, 2.8, 6.4, 3.0, 4.2, 3.9, 5.5),
    (2.2, 2.9, 6.7, 4.0, 5.2, 3.0, 4.1),
    (1.4, 3.6, 4.8, 2.6, 4.2, 5.3, 6.1),
    (2.2, 2.8, 6.3, 2.5, 3.8, 4.8, 5.6),
    (2.3, 2.7, 6.7, 3.8, 4.0, 3.7, 4.8),
    (2.9, 3.0, 6.3, 3.5, 4.1, 3.9, 4.3),
    (2.4, 4.3, 5.9, 4.2, 5.2, 3.0, 3.0),
    (2.34, 3.15, 5.73, 3.27, 4.11, 4.37, 5.02),
), strict=True))  # fmt: skip
TABLE1_FRIEDMAN_P = 7.54e-85

#: Table 2: average ranks for log-loss (rows assumed in Table 1's order).
TABLE2: dict[str, tuple[float, ...]] = dict(zip(_CLF + ("average",), (
    (1.4, 3.1, 3.2, 4.3, 3.5, 5.9, 6.6),
    (4.2, 1.9, 4.7, 4.1, 2.9, 5.2, 5.2),
    (3.8, 4.8, 3.0, 1.6, 2.0, 6.5, 6.5),
    (1.6, 2.2, 5.2, 5.2, 3.5, 4.6, 5.7),
    (1.3, 2.1, 5.8, 6.1, 3.5, 3.6, 5.6),
    (2.2, 2.3, 6.5, 6.2, 4.7, 2.9, 3.4),
    (1.1, 3.4, 3.4, 4.0, 4.4, 5.5, 6.3),
    (1.7, 2.7, 5.6, 4.6, 3.4, 4.2, 5.8),
    (1.3, 2.3, 6.1, 6.1, 4.3, 3.0, 4.8),
    (2.6, 2.2, 4.3, 4.8, 4.5, 4.0, 5.6),
    (3.9, 5.1, 3.4, 2.1, 2.4, 5.6, 5.6),
    (2.25, 2.92, 4.66, 4.48, 3.54, 4.61, 5.54),
), strict=True))  # fmt: skip
TABLE2_FRIEDMAN_P = 4.39e-77

#: Method names of the columns of Tables 3-4.
DNN_COLUMNS: tuple[str, ...] = ("uncal", "temp", "dir_l2", "dir_odir", "vector", "ms_odir")

DNN_TABLE_ROWS: tuple[str, ...] = (
    "c10_convnet", "c10_densenet40", "c10_lenet5", "c10_resnet110", "c10_resnet110_SD",
    "c10_resnet_wide32", "c100_convnet", "c100_densenet40", "c100_lenet5", "c100_resnet110",
    "c100_resnet110_SD", "c100_resnet_wide32", "SVHN_convnet", "SVHN_resnet152_SD",
)  # fmt: skip

#: Table 3: cw-ECE per network (columns as DNN_COLUMNS), and the average ranks.
TABLE3: dict[str, tuple[float, ...]] = dict(zip(DNN_TABLE_ROWS + ("average rank",), (
    (0.104, 0.044, 0.043, 0.045, 0.043, 0.044),
    (0.114, 0.040, 0.034, 0.037, 0.036, 0.037),
    (0.198, 0.171, 0.052, 0.059, 0.057, 0.059),
    (0.098, 0.043, 0.032, 0.039, 0.037, 0.036),
    (0.086, 0.031, 0.031, 0.029, 0.027, 0.027),
    (0.095, 0.048, 0.032, 0.029, 0.032, 0.029),
    (0.424, 0.227, 0.402, 0.240, 0.241, 0.240),
    (0.470, 0.187, 0.330, 0.186, 0.189, 0.191),
    (0.473, 0.385, 0.219, 0.213, 0.203, 0.214),
    (0.416, 0.201, 0.359, 0.186, 0.194, 0.203),
    (0.375, 0.203, 0.373, 0.189, 0.170, 0.186),
    (0.420, 0.186, 0.333, 0.180, 0.171, 0.180),
    (0.159, 0.038, 0.043, 0.026, 0.025, 0.027),
    (0.019, 0.018, 0.022, 0.020, 0.021, 0.021),
    (5.71, 3.71, 3.79, 2.79, 2.29, 2.71),
), strict=True))  # fmt: skip

#: Table 4: log-loss per network, and the average ranks.
TABLE4: dict[str, tuple[float, ...]] = dict(zip(DNN_TABLE_ROWS + ("average rank",), (
    (0.391, 0.195, 0.197, 0.195, 0.197, 0.196),
    (0.428, 0.225, 0.220, 0.224, 0.223, 0.222),
    (0.823, 0.800, 0.744, 0.744, 0.747, 0.743),
    (0.358, 0.209, 0.203, 0.205, 0.206, 0.204),
    (0.303, 0.178, 0.177, 0.176, 0.175, 0.175),
    (0.382, 0.191, 0.185, 0.182, 0.183, 0.182),
    (1.641, 0.942, 1.189, 0.961, 0.964, 0.961),
    (2.017, 1.057, 1.253, 1.059, 1.058, 1.051),
    (2.784, 2.650, 2.595, 2.490, 2.516, 2.487),
    (1.694, 1.092, 1.212, 1.096, 1.089, 1.074),
    (1.353, 0.942, 1.198, 0.945, 0.923, 0.927),
    (1.802, 0.945, 1.087, 0.953, 0.937, 0.933),
    (0.205, 0.151, 0.142, 0.138, 0.144, 0.138),
    (0.085, 0.079, 0.085, 0.080, 0.081, 0.081),
    (6.0, 3.5, 3.79, 2.93, 3.14, 1.64),
), strict=True))  # fmt: skip
