"""Writes sentences/: a folder of generated one-sentence text files in two class folders,
`weather` and `cooking` (run from this folder: `python make_sentences.py`; the files are
committed, this script says how they were made).

Each sentence joins a subject, a verb and an object drawn from its class's own words, with
shared filler words, so the classes share no content word: a bag of words separates them
exactly (100 % accuracy is reachable).
"""

import os
import random

PER_CLASS = 60
WORDS = {
    "weather": (("the rain", "a storm", "the wind", "the fog", "the sun", "thunder"),
                ("falls on", "sweeps over", "covers", "warms", "rolls across"),
                ("the hills", "the harbour", "the valley", "the coast", "the fields")),
    "cooking": (("the chef", "a cook", "my grandmother", "the baker", "a student"),
                ("stirs", "bakes", "slices", "roasts", "seasons"),
                ("the soup", "fresh bread", "the onions", "a chicken", "the pasta")),
}
FILLER = ("today", "again", "slowly", "this morning", "at noon", "every day")


def sentences(label: str, rng: random.Random):
    subjects, verbs, objects = WORDS[label]
    for _ in range(PER_CLASS):
        yield (f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} "
               f"{rng.choice(FILLER)}.").capitalize()


if __name__ == "__main__":
    rng = random.Random(0)
    for label in WORDS:
        folder = os.path.join("sentences", label)
        os.makedirs(folder, exist_ok=True)
        for index, sentence in enumerate(sentences(label, rng)):
            with open(os.path.join(folder, f"{index:03d}.txt"), "w", encoding="utf-8") as out:
                out.write(sentence + "\n")
