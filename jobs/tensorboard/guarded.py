"""TensorBoard that answers only the console's proxy: ``python guarded.py TENSORBOARD-FLAGS...``.

TensorBoard listens on 127.0.0.1, where every local process, another project's trainer included,
can find its port (``/proc/net/tcp``) and read a job's scalars straight from it. Run through this
script (as the project's account, with TensorBoard's own environment), it answers a request only
when it carries the board's token in ``X-Board-Token``, which the console's proxy adds; anything
else gets 403. The token comes in the environment (``TENSORBOARD_GUARD_TOKEN``, readable only by the
project's own account), never on the command line, which every account may read.
"""

import hmac
import os
import sys

HEADER = "HTTP_X_BOARD_TOKEN"


def guard(app, token):
    def guarded(environ, start_response):
        if not hmac.compare_digest(environ.get(HEADER, "").encode(), token.encode()):
            start_response("403 Forbidden", [("Content-Type", "text/plain"), ("Content-Length", "10")])
            return [b"Forbidden\n"]
        return app(environ, start_response)

    return guarded


def main():
    token = os.environ.pop("TENSORBOARD_GUARD_TOKEN", "")
    if len(token) < 32:
        sys.exit("guarded.py: no board token in the environment")
    from absl import app
    from tensorboard import default, main_lib, program

    main_lib.global_init()

    def server(wsgi_app, flags):
        return program.create_port_scanning_werkzeug_server(guard(wsgi_app, token), flags)

    board = program.TensorBoard(plugins=default.get_plugins(), server_class=server)
    app.run(board.main, flags_parser=board.configure, argv=[sys.argv[0], *sys.argv[1:]])


if __name__ == "__main__":
    main()
