# Cell 2: uses `weather` and `warmest` from cell 1 (no tool call: nothing is fetched again).
dry = [c for c, w in weather.items() if w["sky"] != "rain"]
print("dry:", ", ".join(dry))
{"warmest": warmest(weather), "dry": dry}
