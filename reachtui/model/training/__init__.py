"""How the bundled models were made, as commands (`python -m reachtui.model.training.demo`, `.tuned`, `.lora`):
the demo model from scratch, demo-tuned by GRPO on reachtui's own grader, a LoRA adapter with peft. They
use the model room (its loader and Runner) and the demo task's generator; the runtime never imports them."""
