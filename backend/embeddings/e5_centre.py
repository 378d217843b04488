"""The centre of e5-small-v2's vectors, which ``LocalE5Embedder`` takes away.

``CENTRE`` is the mean of the raw e5 vectors (``query: `` prefix, mean pooling, unit
length) of ``SENTENCES``: generic chat messages and memory-style notes written for this
purpose, on everyday topics, none of them from an evaluation set (the shared corpus,
LoCoMo). Regenerate it with ``python -m backend.embeddings.e5_centre`` (prints the
module's ``CENTRE`` line; ``tests/embeddings/test_local_e5.py`` checks the two agree).
"""

from __future__ import annotations

import sys

SENTENCES = (
    "I just got back from the grocery store and forgot the milk again.",
    "My brother is visiting next weekend and I need to clean the flat.",
    "Do you think it is going to rain tomorrow?",
    "I started learning to play the guitar last month.",
    "Work was exhausting today, three meetings in a row.",
    "What should I cook for dinner tonight?",
    "My cat keeps waking me up at five in the morning.",
    "I'm thinking about changing jobs this year.",
    "We watched an old movie last night and fell asleep halfway.",
    "Can you remind me what we talked about yesterday?",
    "My knee hurts when I run more than five kilometres.",
    "I love the smell of coffee in the morning.",
    "The train was late again so I missed the start of class.",
    "I'm nervous about the exam on Friday.",
    "My grandmother turns ninety next month.",
    "I painted the kitchen blue over the weekend.",
    "Tell me a joke, I need cheering up.",
    "I don't really like crowded places.",
    "We are planning a trip to the mountains in the summer.",
    "My phone screen cracked when I dropped it on the stairs.",
    "The user has two children and lives in a small town.",
    "The user works night shifts at a hospital.",
    "The user is vegetarian and avoids dairy.",
    "The user's favourite band is playing in the city in May.",
    "The user plays football with friends on Sundays.",
    "The user is learning Spanish for a move abroad.",
    "The user's dog is called Biscuit and is afraid of thunder.",
    "The user recently broke up with their partner.",
    "The user prefers tea to coffee.",
    "The user has a fear of flying.",
    "The user's father is a retired teacher.",
    "The user bought a second-hand bicycle last week.",
    "The user feels lonely in the evenings.",
    "The user is saving money for a house.",
    "The user's birthday is in late October.",
    "The user enjoys reading science fiction novels.",
    "The user has trouble sleeping before deadlines.",
    "The user volunteers at an animal shelter.",
    "The user moved to a new apartment near the river.",
    "The user's best friend lives in another country.",
    "How was your day?",
    "I finally finished the report my manager wanted.",
    "It's so hot today, I can't concentrate.",
    "I've been feeling a bit down lately.",
    "Could you help me write a birthday message for my mum?",
    "I made pancakes for breakfast and they were a disaster.",
    "My neighbour's music was loud all night.",
    "I got a promotion at work!",
    "We adopted a kitten from the shelter.",
    "I want to start going to the gym again.",
    "The user is allergic to cats but loves them anyway.",
    "The user grew up by the sea.",
    "The user's sister is getting married in spring.",
    "The user drives an old blue car.",
    "The user writes poetry in a notebook.",
    "The user is studying for a nursing degree.",
    "The user gets anxious on the phone.",
    "The user's team won the local chess tournament.",
    "The user cooks curry every Friday.",
    "The user wants to visit Japan one day.",
    "Good morning!",
    "Thanks, that really helps.",
    "I'm not sure what to do about my landlord.",
    "Remember when I told you about my trip?",
)


def compute() -> list[float]:
    """The mean raw e5 vector of ``SENTENCES`` (loads the installed model)."""
    from backend.embeddings.local_e5 import LocalE5Embedder

    vectors = LocalE5Embedder(centre=False).raw(list(SENTENCES))
    return [round(float(x), 6) for x in vectors.mean(axis=0)]


# The output of ``python -m backend.embeddings.e5_centre``.
# fmt: off
CENTRE: tuple[float, ...] = (
    -0.060859, 0.027339, 0.023325, 0.019575, -0.020161, 0.013632, 0.065411, -0.031042,
    -0.017823, 0.042920, 0.014333, -0.030518, -0.037471, 0.045706, 0.027656, -0.019088,
    -0.019320, 0.030076, -0.061032, 0.041420, 0.039180, -0.046368, 0.020142, -0.057594,
    -0.007588, 0.002668, 0.033276, 0.065437, -0.057375, -0.103712, -0.054621, 0.017300,
    0.026631, -0.042037, 0.073555, -0.031254, -0.003239, 0.041402, 0.017068, 0.041141,
    -0.032795, -0.026221, 0.042247, -0.065550, -0.000329, -0.006443, -0.035299, -0.056421,
    0.097773, 0.008053, -0.026029, -0.001221, 0.063776, 0.028989, 0.034089, 0.057528,
    0.057590, 0.064759, 0.054136, 0.074989, -0.000858, 0.047913, -0.122445, 0.131305,
    0.068710, 0.064284, -0.037089, 0.008949, -0.026708, -0.023166, 0.008160, 0.040221,
    -0.039295, 0.061541, -0.021942, 0.049856, 0.018536, 0.046591, -0.031291, -0.008791,
    -0.006523, -0.037684, -0.042734, 0.032608, -0.020691, -0.021057, 0.035173, -0.029602,
    -0.024487, -0.039869, -0.057217, -0.006910, 0.049044, -0.023582, -0.020728, -0.029463,
    0.049861, 0.030851, -0.036219, 0.066345, 0.016282, 0.014275, 0.013698, -0.030295,
    -0.014860, -0.030690, -0.003573, -0.017099, 0.026920, -0.017790, -0.037461, -0.032641,
    0.006685, -0.018915, 0.034326, 0.058232, -0.020324, -0.056510, -0.027457, 0.043594,
    0.037670, 0.018256, 0.018266, -0.011328, 0.040097, -0.050188, 0.082937, 0.091017,
    0.060068, -0.005595, 0.059134, -0.014036, 0.002936, -0.006144, -0.047830, -0.010603,
    -0.039106, -0.007083, 0.053057, -0.009791, -0.039616, -0.086129, -0.021325, -0.108243,
    0.012157, 0.056931, -0.085259, 0.035396, -0.061852, -0.033358, -0.051884, -0.027087,
    0.028418, -0.015831, 0.007070, 0.021426, 0.006192, 0.047947, -0.024465, -0.009539,
    -0.082421, -0.036174, 0.044025, 0.067991, 0.031264, -0.115999, 0.023878, -0.010204,
    0.032104, -0.046042, 0.004491, 0.042519, 0.026628, -0.002552, 0.100472, -0.022965,
    -0.038545, -0.017328, 0.042605, -0.059753, 0.050911, -0.052683, -0.027841, 0.021984,
    0.062368, -0.036761, -0.041208, -0.044366, -0.007935, -0.015430, -0.041131, 0.032458,
    -0.010056, 0.037504, 0.030230, 0.002674, -0.039424, -0.046613, -0.030908, -0.041863,
    0.063081, 0.053166, -0.033737, 0.012093, -0.028814, 0.059764, 0.024750, -0.040369,
    -0.007478, -0.025643, -0.037335, -0.005498, 0.003081, -0.045005, -0.034951, -0.041354,
    0.001328, 0.010554, 0.068237, 0.017818, 0.034819, -0.052691, -0.033166, -0.140499,
    -0.003751, -0.058431, -0.035308, 0.054392, -0.016622, -0.014900, 0.013896, -0.023463,
    0.040321, 0.041863, -0.051815, -0.038958, -0.030545, 0.014348, 0.050671, -0.015422,
    -0.015034, 0.072027, -0.033607, -0.038190, -0.074101, -0.025931, -0.052219, 0.036237,
    -0.030960, 0.126788, 0.083533, 0.022270, -0.034045, 0.042936, 0.024195, 0.027855,
    -0.112787, 0.075910, -0.050585, 0.027575, 0.037290, -0.032181, -0.063828, 0.055372,
    -0.019731, 0.023532, -0.045249, 0.090813, -0.041324, -0.023514, 0.029593, -0.024007,
    -0.005910, 0.017175, -0.030898, 0.048149, -0.020653, -0.058974, -0.038893, -0.082678,
    0.013237, -0.033448, 0.009422, -0.051489, -0.031378, 0.046054, -0.013272, -0.002697,
    0.059032, -0.033369, 0.001627, -0.032954, -0.027713, -0.012194, 0.039995, -0.059001,
    0.035021, 0.057042, 0.051561, 0.043773, -0.020293, -0.022510, -0.055448, -0.026401,
    -0.069309, 0.022949, 0.053204, 0.009982, -0.039355, -0.020234, -0.021870, 0.021797,
    -0.045281, 0.030686, -0.020454, 0.045821, 0.013130, -0.002042, -0.037351, -0.181484,
    -0.027714, 0.045628, 0.013232, -0.001379, 0.026635, 0.031597, -0.007408, -0.026473,
    -0.050759, 0.029627, 0.011690, 0.074666, -0.016181, -0.004216, 0.043247, 0.071511,
    0.000006, -0.035791, -0.057113, 0.023410, 0.028573, 0.140174, 0.007720, -0.014708,
    0.050888, 0.021616, 0.016619, 0.018428, 0.033303, -0.017084, -0.050154, 0.107659,
    -0.025471, 0.047988, 0.072582, -0.000332, 0.027863, 0.027162, -0.006068, 0.043890,
    0.074102, -0.048119, -0.032065, 0.113020, 0.006638, -0.054751, 0.021146, -0.003845,
    -0.038838, -0.022953, -0.039321, 0.051169, 0.059479, 0.049989, -0.050355, -0.067424,
    -0.004876, -0.019168, -0.073119, 0.002165, -0.038309, 0.025825, -0.060319, 0.032688,
)
# fmt: on


if __name__ == "__main__":
    values = ", ".join(f"{x:.6f}" for x in compute())
    sys.stdout.write(f"CENTRE: tuple[float, ...] = ({values})\n")
