"""llmdeck.connect: write a client's configuration from what the live server serves."""

from llmdeck.connect.configs import ServeInfo
from llmdeck.connect.run import ConnectResult, connect_client, gather_info

__all__ = ["ConnectResult", "ServeInfo", "connect_client", "gather_info"]
