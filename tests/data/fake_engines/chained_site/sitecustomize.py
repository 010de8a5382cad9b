"""A site's own sitecustomize: teller's must still run it."""
import os

os.environ["FAKE_SITE_CUSTOMIZED"] = "yes"
