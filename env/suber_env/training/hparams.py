"""The training hyper-parameters per observation and algorithm, shared by the SB3 and RLlib trainers (a module of
its own so that neither trainer imports the other for them)."""

# Hyper-parameters that learn on the taste observation (measured on the sample and 600-user builds);
# SB3's defaults otherwise. gamma is low: a recommendation's rating barely depends on earlier ones.
TASTE_HPARAMS = {
    # A2C: one gradient step per n_steps x num_envs samples; short rollouts and normalised advantages give
    # it enough updates to learn the disliked genres on the 9,742-item build (n_steps 8 did not)
    "a2c": dict(learning_rate=3e-3, n_steps=4, gamma=0.5, ent_coef=0.0, normalize_advantage=True),
    "ppo": dict(learning_rate=3e-3, n_steps=64, batch_size=256, n_epochs=4, gamma=0.5, ent_coef=0.0),
    "maskable-ppo": dict(learning_rate=3e-3, n_steps=64, batch_size=256, n_epochs=4, gamma=0.5, ent_coef=0.0),
    "trpo": dict(n_steps=64, batch_size=256, gamma=0.5),
    "dqn": dict(learning_rate=1e-3, learning_starts=500, gamma=0.5, exploration_fraction=0.3),
}

# With SUBER's observation (items policy) the same settings. A longer horizon would credit a recommendation with
# what its rating teaches the policy later, but on ml-latest-small (400 users, 10,000 steps) gamma 0.9 left PPO
# at the random level (6.59 against 6.51 at 20,000 steps) while gamma 0.5 reached 7.72 (PPO and A2C)
SUBER_HPARAMS = TASTE_HPARAMS

# PPO / A2C settings that learned the planted one-category rule on the 41-film sample in 6,000 steps
PAGE_HPARAMS = {
    "ppo": dict(learning_rate=3e-3, n_steps=64, batch_size=256, n_epochs=4, gamma=0.9, ent_coef=0.0),
    "a2c": dict(learning_rate=3e-3, n_steps=8, gamma=0.9, ent_coef=0.0, normalize_advantage=True),
}
