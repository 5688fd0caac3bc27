"""Pictures, as PNG files or bytes (matplotlib, headless): topology drawings and simulation
timelines (`plots`), cluster runs (`cluster`), and the plots of the sweep report (`experiments`)."""
