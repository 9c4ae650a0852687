# Cell 1: fetch the weather once; later cells of the session use it without fetching again.
cities = ["Paris", "London", "Tokyo"]
weather = {c: get_weather(c) for c in cities}


def warmest(rows):
    return max(rows.values(), key=lambda w: w["temp_c"])["city"]


print(f"loaded {len(weather)} cities")
warmest(weather)
