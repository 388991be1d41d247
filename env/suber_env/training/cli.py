"""``suber-env train`` and ``suber-env eval-policy`` (registered on the app in suber_env/cli.py)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

ALGO_HELP = "a2c | ppo | dqn | trpo | maskable-ppo (the last two need sb3-contrib); --engine rllib: ppo | appo"


def _fail(message: str) -> typer.Exit:
    """One line on stderr, exit status 1 (no traceback): the caller raises what this returns."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _dataset(path: Path):
    """The dataset at ``path``, or one line naming what is wrong and the fix."""
    from ..dataset import DatasetError, load_dataset

    try:
        return load_dataset(path)
    except DatasetError as e:
        raise _fail(f"{e} (a folder that `suber-data build` wrote, e.g. data/movies/sample)") from None


_RATER_KINDS = {
    "oracle": "oracle, not an LLM",
    "cf": "matrix factorisation of the history, not an LLM",
    "hybrid": "matrix factorisation plus a text-embedding correction, not an LLM",
}


def _final_models(runs: Path | None) -> list[Path]:
    """The final models under ``--runs`` (none asked: none); a folder that is missing or holds none is refused."""
    if runs is None:
        return []
    if not runs.is_dir():
        raise _fail(f"--runs {runs}: no such folder; give the --out folder of `suber-env train` (default: runs)")
    finals = sorted(runs.glob("*/seed*/final.zip")) + sorted(runs.glob("*/seed*/final/rllib_checkpoint.json"))
    finals = [f for f in finals if not f.relative_to(runs).parts[0].startswith("pages-")]  # --env pages' runs
    if not finals:
        raise _fail(
            f"--runs {runs}: no trained model in it (no <algo>/seed<k>/final.zip or final/); give the --out folder "
            "of a finished `suber-env train`, or leave --runs out to evaluate the baselines only"
        )
    return finals


def train_cmd(
    dataset: Path = typer.Argument(..., help="A suber-data dataset folder, e.g. data/movies/sample."),
    algo: list[str] = typer.Option(["ppo"], "--algo", help=ALGO_HELP + "; repeat for several."),
    steps: int = typer.Option(20_000, help="Environment steps per run."),
    seeds: int = typer.Option(1, help="Runs per algorithm, seeds 0..K-1."),
    num_envs: int = typer.Option(16, help="SuberVectorEnv slots (one rater call per step for all)."),
    rater: str = typer.Option("oracle", help="Rater name (oracle, cf, hybrid, transformers, openai)."),
    obs: str = typer.Option(
        "taste",
        help="taste (the user's liked/disliked genres, which the oracle rates by, + seen mask) or suber "
        "(SUBER's observation: user id, age, sex and the ratings given so far in the episode).",
    ),
    policy: str = typer.Option(
        "items", help="items (scores items by their features; with suber, from the rated items) or mlp."
    ),
    out: Path = typer.Option(Path("runs"), help="Checkpoints, progress.csv and TensorBoard logs go here."),
    resume: Path | None = typer.Option(None, help="Continue from this checkpoint (one algo, one seed)."),
    engine: str = typer.Option("sb3", help="sb3 (one process) or rllib (Ray RLlib env runners; PPO or APPO)."),
    env_runners: int = typer.Option(1, help="--engine rllib: env runner actors, each with --num-envs slots."),
    ray_address: str | None = typer.Option(None, help="--engine rllib: a running Ray cluster (auto, HOST:PORT)."),
    env: str = typer.Option("items", help="items (Items-v0: one item per step) or pages (Pages-v0: a page per step)."),
    page_size: int = typer.Option(5, help="--env pages: items per page."),
    chooser: str = typer.Option(
        "oracle", help="--env pages: who picks from the pages (oracle, exposure, transformers)."
    ),
    pessimism: float = typer.Option(
        0.0,
        help="--rater cf or hybrid: lower each reward by this many rating spreads / sqrt(1 + the item's history "
        "ratings), so that the policy is not drawn to rarely rated items the model overrates (0: none).",
    ),
) -> None:
    """Train recommenders with Stable-Baselines3 (default) or Ray RLlib on the environment."""
    from .trainer import ALGOS, TrainConfig, train

    if env not in ("items", "pages"):
        raise _fail(f"--env {env!r} is not one of items, pages")
    if pessimism < 0:
        raise _fail(f"--pessimism {pessimism}: give 0 (none) or a positive number, for example 1")
    if pessimism and (rater not in ("cf", "hybrid") or engine != "sb3" or env != "items"):
        raise _fail(f"--pessimism {pessimism} lowers the cf and hybrid raters' rewards in the item env (--engine sb3)")
    rater_kwargs = {"pessimism": pessimism} if pessimism else {}
    if engine == "rllib":
        pages = {"chooser": chooser, "env_options": {"page_size": page_size}} if env == "pages" else None
        return _train_rllib(
            dataset, algo, steps, seeds, num_envs, rater, obs, policy, out, resume, env_runners, ray_address, pages
        )
    if env == "pages":
        return _train_pages(dataset, algo, steps, seeds, num_envs, rater, chooser, page_size, out)
    if engine != "sb3":
        raise typer.BadParameter(f"--engine {engine!r} is not one of ('sb3', 'rllib')")
    for a in algo:
        if a not in ALGOS:
            raise typer.BadParameter(f"--algo {a!r} is not one of {ALGOS}")
    ds = _dataset(dataset)
    for a in algo:
        for s in range(seeds):
            t = time.perf_counter()
            cfg = TrainConfig(
                algo=a, steps=steps, seed=s, num_envs=num_envs, rater=rater, rater_kwargs=rater_kwargs, obs=obs,
                policy=policy,
            )  # fmt: skip
            wary = f", --pessimism {pessimism:g}" if pessimism else ""
            typer.echo(f"{a} seed {s}: training for {steps} steps ({num_envs} envs, --obs {obs}{wary})")
            model = train(ds, cfg, out, resume=resume, progress=typer.echo)
            ran = model.num_timesteps - (0 if resume is None else model._num_timesteps_at_start)
            note = "" if ran == steps else f" (asked {steps}; whole rollouts of {num_envs} envs)"
            typer.echo(f"{a} seed {s}: {ran} steps{note} in {time.perf_counter() - t:.1f}s -> {out / a / f'seed{s}'}")


def _train_pages(dataset, algo, steps, seeds, num_envs, rater, chooser, page_size, out) -> None:
    from .pages import PAGE_HPARAMS
    from .trainer import TrainConfig, train

    if any(a not in PAGE_HPARAMS for a in algo):
        raise _fail(f"--env pages trains --algo {' or '.join(PAGE_HPARAMS)} (SB3)")
    ds = _dataset(dataset)
    for a in algo:
        for s in range(seeds):
            t = time.perf_counter()
            cfg = TrainConfig(
                algo=a, steps=steps, seed=s, num_envs=num_envs, rater=rater, env="pages", chooser=chooser,
                env_options={"page_size": page_size},
            )  # fmt: skip
            typer.echo(f"pages-{a} seed {s}: training for {steps} steps ({num_envs} envs, pages of {page_size})")
            model = train(ds, cfg, out, progress=typer.echo)
            typer.echo(
                f"pages-{a} seed {s}: {model.num_timesteps} steps in {time.perf_counter() - t:.1f}s "
                f"-> {out / f'pages-{a}' / f'seed{s}'}"
            )


def _train_rllib(
    dataset, algo, steps, seeds, num_envs, rater, obs, policy, out, resume, runners, address, pages=None
) -> None:
    """``pages``: None on the item env, else the page env's TrainConfig fields (chooser, env_options)."""
    from .trainer import TrainConfig

    algos = ("ppo", "appo")  # rllib_trainer.ALGOS, named here so that the check needs no RLlib
    if not algo or any(a not in algos for a in algo) or (pages is None and (obs != "taste" or policy != "items")):
        raise _fail(f"--engine rllib trains --algo {' or '.join(algos)} (items env: with --obs taste --policy items)")
    if resume is not None and (len(algo) > 1 or seeds > 1):
        raise _fail("--resume continues one run: give one --algo and --seeds 1")
    try:
        import ray.rllib  # noqa: F401 - RLlib itself, not only Ray

        from .rllib_trainer import train_rllib
    except ImportError as exc:
        raise _fail(
            f"--engine rllib needs ray[rllib] ({exc}); it pins gymnasium 1.2.2, so install it in its own overlay: "
            "`make rllib` (docs/training.md)"
        ) from None
    ds = _dataset(dataset)
    for a in algo:
        for s in range(seeds):
            t = time.perf_counter()
            env = {"env": "pages", **pages} if pages else {}
            cfg = TrainConfig(algo=a, steps=steps, seed=s, num_envs=num_envs, rater=rater, **env)
            name = f"pages-{a}" if pages else a
            typer.echo(f"{name} seed {s} on RLlib: {steps} steps ({runners} env runners x {num_envs} envs)")
            algorithm, ran = train_rllib(
                ds, cfg, out, resume=resume, progress=typer.echo, address=address, env_runners=runners
            )
            algorithm.stop()
            typer.echo(f"{name} seed {s}: {ran} steps in {time.perf_counter() - t:.1f}s -> {out / name / f'seed{s}'}")


def eval_policy_cmd(
    dataset: Path = typer.Argument(..., help="A suber-data dataset folder."),
    runs: Path | None = typer.Option(None, help="The --out folder of `suber-env train` (its final models)."),
    seeds: int = typer.Option(3, help="Evaluation seeds (confidence intervals over them)."),
    steps: int = typer.Option(10, help="Recommendations per user (every user, in order)."),
    rater: str = typer.Option("oracle", help="Rater name."),
    out: Path = typer.Option(Path("report"), help="Folder for report.md, learning_curves.png, genre_mix.png."),
    env: str = typer.Option("items", help="items, or pages: page metrics of `train --env pages` models."),
    page_size: int = typer.Option(5, help="--env pages: items per page."),
    chooser: str = typer.Option("oracle", help="--env pages: who picks from the pages."),
    episodes: int = typer.Option(200, help="--env pages: episodes per seed (users in turn)."),
) -> None:
    """Evaluate trained models and the baselines on every user; write the comparison report."""
    from .evaluate import compare, markdown_table
    from .policies import BASELINES
    from .report import write_report
    from .trainer import load_model, model_policy

    if env == "pages":
        return _eval_pages(dataset, runs, seeds, episodes, rater, chooser, page_size, out)
    ds = _dataset(dataset)
    finals = _final_models(runs)
    policies = {n: (lambda s, c=c: c(ds, s)) for n, c in BASELINES.items()}
    for final in finals:
        if final.name == "rllib_checkpoint.json":  # an RLlib run (--engine rllib)
            from .rllib_trainer import RLlibPolicy

            name = f"{final.parents[2].name} ({final.parents[1].name}, rllib)"
            RLlibPolicy.load(final.parent, ds, name)  # refuse a model of another dataset before evaluating
            policies[name] = lambda s, f=final.parent, n=name: RLlibPolicy.load(f, ds, n)
            continue
        algo, seed = final.parent.parent.name, final.parent.name
        model, norm = load_model(final, algo)
        model_policy(model, ds, f"{algo} ({seed})", norm)  # refuse a model of another dataset before evaluating
        policies[f"{algo} ({seed})"] = lambda s, m=model, n=algo, z=norm: model_policy(m, ds, n, z)
    results, mix = compare(ds, policies, list(range(seeds)), steps=steps, rater=rater)
    note = f"Dataset {dataset}, rater {rater} ({_RATER_KINDS.get(rater, 'LLM')}), "
    note += f"{ds.n_users} users x {steps} steps, seeds 0..{seeds - 1}, mean ± 95% CI over seeds."
    write_report(out, results, mix, ds, runs, note)
    typer.echo(markdown_table(results))
    typer.echo(f"report: {out / 'report.md'}")


def _eval_pages(dataset, runs, seeds, episodes, rater, chooser, page_size, out) -> None:
    from .pages import compare_pages, page_runs, pages_table

    ds = _dataset(dataset)
    finals = page_runs(runs) if runs is not None else []
    if runs is not None and not finals:
        raise _fail(
            f"--runs {runs}: no pages-<algo>/seed<k>/final.zip (or final/ of --engine rllib) in it; give the --out "
            "of `train --env pages`"
        )
    try:
        results = compare_pages(ds, finals, list(range(seeds)), episodes, chooser, rater, page_size=page_size)
    except ValueError as e:
        raise _fail(str(e)) from None
    table = pages_table(results)
    note = (
        f"Dataset {dataset}, pages of {page_size}, chooser {chooser}, rater {rater}, {episodes} episodes per seed, "
        f"seeds 0..{seeds - 1}, mean ± 95% CI over seeds. picks_per_page: items picked per page shown; "
        "pages_until_leave: pages an episode lasted (time to leave); rating_of_picks: the mean rating of the picked "
        "items; return: the episode's summed reward."
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(f"# Page policies\n\n{note}\n\n{table}\n")
    typer.echo(table)
    typer.echo(f"report: {out / 'report.md'}")
