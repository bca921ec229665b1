# A namespace shared with the other Habana distributions (habana-media-loader's mediapipe), as the real one.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
