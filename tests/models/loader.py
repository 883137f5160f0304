"""Loads a model file of this folder as flow (as written) or as its torch twin (the import lines
replaced: `import flow as torch` -> `import torch`, `import flow.nn as nn` -> `import torch.nn as nn`,
`import flow.nn.functional as F` -> `import torch.nn.functional as F`)."""
import os
import types

HERE = os.path.dirname(os.path.abspath(__file__))
TWIN_IMPORTS = {"import flow as torch": "import torch", "import flow.nn as nn": "import torch.nn as nn",
                "import flow.nn.functional as F": "import torch.nn.functional as F"}


def load(name, framework="flow"):
    path = os.path.join(HERE, name + ".py")
    with open(path) as f:
        src = f.read()
    if framework == "torch":
        lines = src.split("\n")
        for i, line in enumerate(lines):
            for old, new in TWIN_IMPORTS.items():
                if line == old or line.startswith(old + "  #"):
                    lines[i] = line.replace(old, new)
        src = "\n".join(lines)
        assert "flow" not in "\n".join(l for l in src.split("\n") if l.startswith("import")), "untwinned import"
    mod = types.ModuleType(f"{framework}_{name}")
    mod.__file__ = path
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod
