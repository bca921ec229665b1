"""Published reference numbers: the Hugging Face / optimum-habana study and the published history."""
