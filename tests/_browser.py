"""Helpers for the browser tests: the app on a free loopback port (uvicorn in a thread) and a
headless Chromium from the OS packages, driven by Selenium through the system chromedriver
(Selenium never downloads a browser or a driver here)."""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"   # screenshots; ignored by git


def chromium_paths() -> tuple[str | None, str | None]:
    browser = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else shutil.which("chromedriver")
    return browser, driver


class AppServer:
    """create_app() served by uvicorn on 127.0.0.1 and a port the OS chose, in a daemon thread."""

    def __init__(self):
        import uvicorn
        from membound.present.app.server import create_app
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> AppServer:
        self.thread.start()
        deadline = time.monotonic() + 60      # a hang guard: a loaded 2-core machine starts slowly
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the app server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def chrome(browser: str, driver: str, download_dir: Path | None = None):
    os.environ.setdefault("SE_OFFLINE", "true")       # Selenium Manager: never fetch anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,1500", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    if download_dir is not None:
        opts.add_experimental_option("prefs", {"download.default_directory": str(download_dir),
                                               "download.prompt_for_download": False})
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)
