"""membound: how fast a large language model runs on given hardware, from bytes and FLOPs."""
from .errors import DoesNotFitError, InvalidInputError, MemboundError, ProfileError, UnknownNameError
from .dtypes import DType, get_dtype, list_dtypes, register_dtype
from .hardware import Hardware, add_hardware_dir, list_hardware, load_hardware
