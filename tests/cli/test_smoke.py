"""The shipped registry loads and its demo recipe runs."""

from tests.conftest import Home


def test_detect_python_runs_and_reports_its_interpreter(home: Home) -> None:
    home.recipe("echo-version", """
        name: echo-version
        summary: test
        tags: [echo]
        outputs:
          text: {type: str}
        """, """
        def run(ctx):
            done = ctx.run_cmd(["python3", "-c", "print('hello from a step')"])
            return {"text": done.stdout.strip()}
        """)
    result = home.cmx_json("run", "echo")
    assert result["ok"] is True
    assert result["outputs"] == {"text": "hello from a step"}
