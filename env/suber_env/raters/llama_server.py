"""``python -m suber_env.raters.llama_server ARGS``: llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server ARGS``, the same arguments) with llama.cpp's extra CPU buffer types off.

Why: with the llama-cpp-python 0.3.36 wheel, a model whose weights llama.cpp repacks into its extra CPU buffer
types (AMX / repacked Q4 on recent Intel Xeons) crashes with a segmentation fault on its first decode; the server
has no option for it, while the model parameter ``use_extra_bufts`` turns the repacking off. Plain CPU matrix
products are used instead (the same numbers up to float rounding, slower on AMX machines). On a machine where
``python -m llama_cpp.server`` works, either command serves the same model.
"""

from __future__ import annotations

import sys


def _without_extra_buffer_types() -> None:
    import llama_cpp
    import llama_cpp.llama

    default = llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_model_default_params = params
    llama_cpp.llama.llama_cpp.llama_model_default_params = params  # the name Llama() reads


def main(argv: list[str] | None = None) -> None:
    try:
        import llama_cpp.server.__main__ as server
    except ImportError as exc:
        raise SystemExit("needs llama-cpp-python's server: pip install 'llama-cpp-python[server]'") from exc
    _without_extra_buffer_types()
    sys.argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    server.main()


if __name__ == "__main__":
    main()
