# Plan a trip: compare the weather in three cities at once, price it, and tell a friend.
import asyncio

cities = ["Paris", "London", "Tokyo"]
forecasts = await asyncio.gather(*[get_forecast(c, days=2) for c in cities])
best = cities[0]
best_temp = -100
for city, days in zip(cities, forecasts):
    if days[0]["temp_c"] > best_temp:
        best, best_temp = city, days[0]["temp_c"]
try:
    get_weather("Atlantis")
except ValueError as e:
    print("skipped:", e)
rate = flaky_exchange_rate("EUR", "USD")
print(f"best city: {best} at {best_temp}C; 1000 EUR = {1000 * rate:.0f} USD")
{"best": best, "temp_c": best_temp, "usd_per_eur": rate}
