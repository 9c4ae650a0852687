# A pandas table and a matplotlib chart, handed back as artifacts (run with --runtime python):
#   codemode run examples/forecast_chart.py --runtime python --tools examples.tools
#   codemode artifacts ID forecast.png -o forecast.png
import asyncio

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

cities = ["Paris", "London", "Tokyo"]
forecasts = await asyncio.gather(*(get_forecast(c, days=5) for c in cities))
df = pd.DataFrame([{"city": c, **day} for c, days in zip(cities, forecasts) for day in days])
table = df.pivot(index="day", columns="city", values="temp_c")

ax = table.plot(marker="o", title="5-day forecast")
ax.set_ylabel("°C")
plt.savefig(f"{OUTPUTS_DIR}/forecast.png", dpi=80)
table.to_csv(f"{OUTPUTS_DIR}/forecast.csv")
table.mean().round(1).to_dict()
