# Needs approval: send_email waits for `codemode approve`.
w = get_weather("Paris")
receipt = send_email(to="ana@example.com", subject="Weather", body=f"Paris: {w['temp_c']}C, {w['sky']}")
receipt["sent"]
