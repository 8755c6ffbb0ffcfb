"""Dead letters: changes a consumer could not apply, kept with their reason until replayed or purged."""
