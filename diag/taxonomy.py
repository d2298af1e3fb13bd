"""Root-cause category ids (../shared/reference/taxonomy.md), with one line each.

Added here (no id in the shared taxonomy fits): env.gpu_fault, for a GPU whose own state is
broken, which nvidia-smi shows and no SGLang flag can change.
"""
CATEGORIES = {
    "oom.weights": "the model's weights (plus draft model) do not fit on the GPUs as sharded",
    "oom.kv_pool": "weights fit but too little is left for the KV (and state) pool under --mem-fraction-static",
    "oom.cuda_graph": "OOM while capturing CUDA graphs or other start-up buffers after the pools were allocated",
    "oom.runtime_prefill": "OOM in a forward pass of a prefill batch while serving",
    "oom.runtime_decode": "OOM or KV exhaustion during decode while serving",
    "oom.speculative": "memory failure caused by speculative decoding (draft weights, draft KV, verify buffers)",
    "oom.mamba_state": "the Mamba / linear-attention state pool does not fit",
    "oom.other_process": "memory held by another process leaves too little",
    "oom.multimodal": "the vision/audio encoder or image preprocessing exhausts memory",
    "config.mamba_strategy": "the Mamba scheduler strategy conflicts with radix cache and speculative decoding",
    "config.speculative": "other speculative-decoding configuration errors",
    "config.unknown_flag": "the server rejected a flag this version does not have",
    "config.invalid_value": "a flag's value is outside its choices or range",
    "config.context_length": "a request or --context-length exceeds what the model or the KV pool allows",
    "config.incompatible_flags": "two or more flags that cannot be used together",
    "env.empty_log": "the log is empty or holds no line from the server",
    "env.killed": "the process was killed from outside with no Python traceback",
    "env.host_memory": "host RAM, pinned memory or shared memory ran out",
    "env.port_in_use": "an address or port is already taken",
    "env.nccl": "distributed communication failed (NCCL, gloo, P2P, timeouts)",
    "env.cuda_arch_driver": "the GPU architecture, driver or CUDA version does not match the build",
    "env.import_error": "a Python package is missing or built against another torch/CUDA",
    "env.model_load": "the model files cannot be found, downloaded or read",
    "env.http_proxy": "proxy variables catch the server's own local requests",
    "env.gpu_fault": "the GPU itself is in an error state (ERR! in nvidia-smi, uncorrectable ECC, pending row remaps, lost from the bus)",
    "runtime.watchdog_hang": "the scheduler made no progress and the watchdog fired",
    "runtime.other": "a runtime failure that fits none of the above",
}
