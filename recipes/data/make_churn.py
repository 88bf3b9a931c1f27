"""Writes churn.csv: a generated customer table with a known rule (run from this folder:
`python make_churn.py`; the file is committed, this script says how it was made).

Each of 400 customers has an id, an age (empty for 1 in 10), a country (FR, DE, ES, IT, UK;
empty for 1 in 12), a plan (basic, pro), monthly charges, support calls (0-6), whether they
have a partner (yes/no) and a signup date. The target `churn` is `leave` exactly when

    support_calls >= 4  or  (country in {DE, ES} and plan == basic)

and `stay` otherwise: every input of the rule is always visible (an empty country is not DE
or ES), so a model can reach 100 % accuracy; age, charges, partner and date are noise.
"""

import csv
import datetime
import random

ROWS = 400
COUNTRIES = ("FR", "DE", "ES", "IT", "UK")


def rows(seed: int = 0):
    rng = random.Random(seed)
    start = datetime.date(2020, 1, 1)
    for index in range(ROWS):
        country = rng.choice(COUNTRIES)
        plan = rng.choice(("basic", "pro"))
        calls = rng.choice((0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6))
        leave = calls >= 4 or (country in ("DE", "ES") and plan == "basic")
        age = rng.randint(18, 80)
        yield {"customer_id": f"C{index:04d}",
               "age": "" if rng.random() < 0.1 else age,
               "country": "" if rng.random() < 1 / 12 else country,
               "plan": plan,
               "monthly_charges": round(rng.uniform(10, 120), 2),
               "support_calls": calls,
               "has_partner": rng.choice(("yes", "no")),
               "signup_date": (start + datetime.timedelta(days=rng.randint(0, 1400))).isoformat(),
               "churn": "leave" if leave else "stay"}


if __name__ == "__main__":
    table = list(rows())
    with open("churn.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
