// gRPC client over libuv + nghttp2 (issue 6 builds it; `ubiq` and `ubiquity-load` use it).
import UbiquityGRPC
