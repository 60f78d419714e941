"""membound: how fast a large language model runs on given hardware, from bytes and FLOPs.

    import membound as mb
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=1, prompt_tokens=2048, output_tokens=256)
    print(r)
"""
from .errors import DoesNotFitError, InvalidInputError, MemboundError, ProfileError, UnknownNameError
from .dtypes import DType, get_dtype, list_dtypes, register_dtype
from .hardware import Hardware, add_hardware_dir, list_hardware, load_hardware
from .model import Model, list_models, load_model
from .runtime import Runtime, list_runtimes, load_runtime
from .parallel import Parallel
from .quantization import Quantization
from .speculative import SpeculativeDecoding, expected_tokens_per_round
from .result import Memory, Result
from .estimate import bandwidth_ceiling, estimate

__version__ = "0.1.0"
