"""The boundary: one reader per external format, with its bounds, its decoding and its messages.

A file or reply from elsewhere is read here once, the same way for every command: bounded in size
(:mod:`llmdeck.util.localfile`) and depth (:mod:`llmdeck.util.jsonsafe`, :mod:`.json_bounds`),
decoded, and every failure turned into one paragraph naming the file (a :class:`~llmdeck.errors.UsageError`,
exit 2). What the content *means* stays with the package that uses it (the planner checks a config's
sizes; the bench checks a result's schema).

* :mod:`.model_folder`: a Hugging Face model folder's ``config.json``, ``hf_quant_config.json`` and
  ``model.safetensors.index.json``.
* :mod:`.safetensors`: a ``*.safetensors`` file's header, checked against the file's size.
* :mod:`.result_file`: a saved result (bench, eval, a ``vllm bench serve`` JSON): gzipped or not,
  its ``kind`` and ``schema_version``, validated into the caller's model.
* :mod:`.netcheck_rows`: an all-reduce sweep's saved output (``cluster netcheck``), its JSON lines.
* :mod:`.tune_trials`: a tune's ``trials.jsonl``, header and trial lines validated into tune's models.
* :mod:`.eval_task`: an eval task folder's ``task.toml`` and prompts.
* :mod:`.gateway_yaml`: the gateway's config file, YAML parsed with every node's line kept.
* :mod:`.launch_spec`: a launch spec file (``plan --spec-out``), validated into ``engines.spec.LaunchSpec``.

This is a bottom layer: it imports only :mod:`llmdeck.errors` and :mod:`llmdeck.util`.
"""
