"""The secret corpus: fake secrets of every kind, look-alikes, and the field's rules.

Everything here is generated from a fixed seed, so no file in the repository
holds a whole token (no scanner or push protection trips on it), and each
fake has the shape of the real thing, checksum included where the provider
has one (GitHub's and npm's CRC32 suffix, age's bech32). None is a real
credential.

* :data:`SECRETS`: at least 150 fake secrets of at least 40 kinds, each with
  a line that holds it as people write it and a bash command that ends with
  it. tests/secrets/test_redaction.py tags them through the CLI in every placement.
* :data:`GITLEAKS`: every rule id of gitleaks' default configuration
  (``config/gitleaks.toml``, read for this in December 2026), mapped to the
  kind that covers it, or to the reason it is left out (:data:`LEFT_OUT`).
  Provider rules have a sample here; rules that only name a provider in the
  variable (``adafruit_key = ...``) are covered by the keyword detector
  (``env-secret``) and sampled that way.
* :data:`DETECT_SECRETS`: detect-secrets' plugins, the same way.
* :data:`LOOKALIKES`: at least 300 strings that look like secrets and are
  not; :data:`EXPECTED_REDACTED` lists the few the scanner does redact, and
  why.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from machine_git.secrets import KINDS
from machine_git.secrets import redact_text
from machine_git.secrets import scan_text

B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


class Fake(NamedTuple):
    """One fake secret: its kind, the secret, a line holding it, a command ending it."""

    kind: str
    secret: str
    line: str
    command: str


class _Gen:
    """Random strings of given alphabets, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def alnum(self, n: int) -> str:
        # at least one digit, one upper, one lower: real keys almost always are
        while True:
            out = self.s(ALNUM, n)
            if n < 8 or (
                any(c.isdigit() for c in out)
                and any(c.isupper() for c in out)
                and any(c.islower() for c in out)
            ):
                return out

    def hex(self, n: int) -> str:
        return self.s(HEX, n)

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + self.s(string.digits, n - 1)

    def b64(self, nbytes: int, url: bool = False) -> str:
        raw = bytes(self.rng.randrange(256) for _ in range(nbytes))
        enc = base64.urlsafe_b64encode if url else base64.b64encode
        return enc(raw).decode()

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def password(self) -> str:
        words = ["Tr0ub4dor", "Corr3ct", "Hors3", "B4ttery", "St4ple", "Wint3r"]
        return (
            self.rng.choice(words)
            + self.rng.choice("!#%&*@^")
            + self.digits(2)
            + self.s(ALNUM, 4)
        )


def _b62(n: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = B62[r] + out
    return out


def github_style(prefix: str, g: _Gen) -> str:
    """GitHub's token format (also npm's): 30 random characters and a CRC32."""
    body = g.s(ALNUM, 30)
    return prefix + body + _b62(zlib.crc32(body.encode())).rjust(6, "0")


def _bech32_polymod(values: list[int]) -> int:
    gen = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if (top >> i) & 1 else 0
    return chk


def age_key(g: _Gen) -> str:
    """An age X25519 identity: bech32 of 32 random bytes with its checksum."""
    hrp = "age-secret-key-"
    data: list[int] = []
    acc = bits = 0
    for byte in bytes(g.rng.randrange(256) for _ in range(32)):
        acc, bits = (acc << 8) | byte, bits + 8
        while bits >= 5:
            bits -= 5
            data.append((acc >> bits) & 31)
    if bits:
        data.append((acc << (5 - bits)) & 31)
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    poly = _bech32_polymod([*expanded, *data, 0, 0, 0, 0, 0, 0]) ^ 1
    check = [(poly >> 5 * (5 - i)) & 31 for i in range(6)]
    return (hrp + "1" + "".join(BECH32[d] for d in data + check)).upper()


def jwt(g: _Gen) -> str:
    def part(obj: object) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    head = part({"alg": "HS256", "typ": "JWT"})
    body = part({"sub": g.digits(9), "name": "Dana Dev", "iat": 1795979067})
    return f"{head}.{body}.{g.b64(32, url=True).rstrip('=')}"


def pem(g: _Gen, label: str) -> str:
    der = b"\x30\x82\x04\xa4\x02\x01\x00\x02\x82\x01\x01\x00"
    der += bytes(g.rng.randrange(256) for _ in range(700))
    body = base64.b64encode(der).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


# -- provider tokens ---------------------------------------------------------------

# (kind, the gitleaks rule ids it covers, the token's template). In a template,
# {X:n} is n random characters of class X: A letters and digits (both cases
# and a digit), a lower-case letters and digits, h hex, U upper-case letters
# and digits, L letters, d digits, w letters, digits, - and _, 2 base32, b
# base64 of n bytes, u base64url of n bytes. @name is a whole token built by
# the function of that name (checksums, JSON inside).
PROVIDERS: tuple[tuple[str, str, str], ...] = (
    ("anthropic-api-key", "anthropic-api-key", "sk-ant-api03-{w:93}AA"),
    ("anthropic-api-key", "anthropic-admin-api-key", "sk-ant-admin01-{w:93}AA"),
    ("anthropic-api-key", "claude-code-oauth-token", "sk-ant-oat01-{w:95}"),
    ("openai-api-key", "openai-api-key", "sk-proj-{A:58}T3BlbkFJ{A:58}"),
    ("openai-api-key", "", "sk-svcacct-{w:74}"),
    ("openai-api-key", "", "sk-{A:20}T3BlbkFJ{A:20}"),
    ("openrouter-api-key", "", "sk-or-v1-{h:64}"),
    ("tinker-api-key", "", "tml-{A:48}"),
    ("xai-api-key", "", "xai-{A:80}"),
    ("groq-api-key", "groq-api-key", "gsk_{A:52}"),
    ("replicate-api-token", "", "r8_{A:37}"),
    ("perplexity-api-key", "perplexity-api-key", "pplx-{A:48}"),
    ("langsmith-api-key", "langsmith-api-key", "lsv2_pt_{h:32}_{h:10}"),
    ("tavily-api-key", "", "tvly-dev-{A:32}"),
    ("huggingface-token", "huggingface-access-token", "hf_{L:34}"),
    ("huggingface-token", "huggingface-organization-api-token", "api_org_{L:34}"),
    ("github-token", "github-pat", "@github:ghp_"),
    ("github-token", "github-oauth", "@github:gho_"),
    ("github-token", "github-app-token", "@github:ghs_"),
    ("github-token", "github-refresh-token", "@github:ghr_"),
    ("github-token", "github-fine-grained-pat", "github_pat_{A:22}_{A:59}"),
    ("gitlab-token", "gitlab-pat", "glpat-{w:20}"),
    ("gitlab-token", "gitlab-pat-routable", "glpat-{A:36}.01{a:7}"),
    ("gitlab-token", "gitlab-ptt", "glptt-{h:40}"),
    ("gitlab-token", "gitlab-deploy-token", "gldt-{A:20}"),
    ("gitlab-token", "gitlab-runner-authentication-token", "glrt-{A:20}"),
    (
        "gitlab-token",
        "gitlab-runner-authentication-token-routable",
        "glrt-t1_{A:30}.01{a:7}",
    ),
    ("gitlab-token", "gitlab-cicd-job-token", "glcbt-{A:3}_{A:20}"),
    ("gitlab-token", "gitlab-feed-token", "glft-{A:20}"),
    ("gitlab-token", "gitlab-incoming-mail-token", "glimt-{A:25}"),
    ("gitlab-token", "gitlab-kubernetes-agent-token", "glagent-{A:50}"),
    ("gitlab-token", "gitlab-oauth-app-secret", "gloas-{A:64}"),
    ("gitlab-token", "gitlab-scim-token", "glsoat-{A:20}"),
    ("gitlab-token", "gitlab-feature-flag-client-token", "glffct-{A:20}"),
    ("gitlab-token", "gitlab-rrt", "GR1348941{A:20}"),
    ("npm-token", "npm-access-token", "@github:npm_"),
    ("pypi-token", "pypi-upload-token", "pypi-AgEIcHlwaS5vcmc{u:60}"),
    ("rubygems-token", "rubygems-api-token", "rubygems_{h:48}"),
    ("clojars-token", "clojars-api-token", "CLOJARS_{a:60}"),
    ("dockerhub-token", "", "dckr_pat_{w:27}"),
    ("artifactory-token", "artifactory-api-key", "AKCp{A:69}"),
    ("artifactory-token", "artifactory-reference-token", "cmVmd{A:59}"),
    ("sourcegraph-token", "sourcegraph-access-token", "sgp_{h:16}_{h:40}"),
    ("readme-api-token", "readme-api-token", "rdme_{a:70}"),
    ("prefect-api-token", "prefect-api-token", "pnu_{A:36}"),
    ("infracost-api-token", "infracost-api-token", "ico-{A:32}"),
    ("chieftools-token", "chieftools-pat", "ctp_{A:36}"),
    ("chieftools-token", "chieftools-access-token", "cto_{A:36}"),
    ("chieftools-token", "chieftools-refresh-token", "ctr_{A:36}"),
    ("aws-access-key", "aws-access-token", "AKIA{2:16}"),
    ("aws-access-key", "", "ASIA{2:16}"),
    ("aws-bedrock-key", "aws-amazon-bedrock-api-key-long-lived", "ABSK{b:100}"),
    (
        "aws-bedrock-key",
        "aws-amazon-bedrock-api-key-short-lived",
        "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t{b:60}",
    ),
    ("google-api-key", "gcp-api-key", "AIza{w:35}"),
    ("google-oauth-secret", "", "GOCSPX-{w:28}"),
    ("google-oauth-token", "", "ya29.a0{w:120}"),
    ("alibaba-access-key", "alibaba-access-key-id", "LTAI{A:20}"),
    ("digitalocean-token", "digitalocean-pat", "dop_v1_{h:64}"),
    ("digitalocean-token", "digitalocean-access-token", "doo_v1_{h:64}"),
    ("digitalocean-token", "digitalocean-refresh-token", "dor_v1_{h:64}"),
    ("heroku-api-key", "heroku-api-key-v2", "HRKU-AA{w:58}"),
    ("fly-token", "flyio-access-token", "fm2_{b:90}"),
    ("netlify-token", "", "nfp_{A:40}"),
    ("pulumi-token", "pulumi-api-token", "pul-{h:40}"),
    ("supabase-token", "", "sbp_{h:40}"),
    ("planetscale-token", "planetscale-api-token", "pscale_tkn_{A:43}"),
    ("planetscale-token", "planetscale-oauth-token", "pscale_oauth_{A:43}"),
    ("planetscale-token", "planetscale-password", "pscale_pw_{A:43}"),
    ("scalingo-api-token", "scalingo-api-token", "tk-us-{w:48}"),
    ("databricks-token", "databricks-api-token", "dapi{h:32}"),
    ("clickhouse-api-key", "clickhouse-cloud-api-secret-key", "4b1d{A:38}"),
    ("castai-api-key", "castai-api-key", "castai_v1_{A:64}_{A:8}"),
    ("yandex-api-key", "yandex-api-key", "AQVN{w:36}"),
    ("yandex-api-key", "yandex-access-token", "t1.{A:40}.{w:86}"),
    ("onepassword-token", "1password-service-account-token", "ops_eyJ{A:266}"),
    (
        "onepassword-secret-key",
        "1password-secret-key",
        "A3-{U:6}-{U:11}-{U:5}-{U:5}-{U:5}",
    ),
    ("age-secret-key", "age-secret-key", "@age_key"),
    ("grafana-token", "grafana-service-account-token", "glsa_{A:32}_{h:8}"),
    ("grafana-token", "grafana-cloud-api-token", "glc_{b:60}"),
    ("grafana-token", "grafana-api-key", "eyJrIjoi{A:90}"),
    ("jwt", "jwt-base64", "@jwt_base64"),
    ("stripe-key", "stripe-access-token", "sk_live_{A:99}"),
    ("stripe-key", "", "rk_test_{A:24}"),
    ("stripe-webhook-secret", "", "whsec_{A:32}"),
    ("square-token", "square-access-token", "sq0atp-{w:22}"),
    ("square-token", "", "EAAA{w:60}"),
    ("shopify-token", "shopify-access-token", "shpat_{h:32}"),
    ("shopify-token", "shopify-custom-access-token", "shpca_{h:32}"),
    ("shopify-token", "shopify-private-app-access-token", "shppa_{h:32}"),
    ("shopify-token", "shopify-shared-secret", "shpss_{h:32}"),
    ("shippo-api-token", "shippo-api-token", "shippo_live_{h:40}"),
    ("flutterwave-key", "flutterwave-secret-key", "FLWSECK_TEST-{h:32}-X"),
    ("flutterwave-key", "flutterwave-encryption-key", "FLWSECK_TEST-{h:12}"),
    (
        "plaid-token",
        "plaid-api-token",
        "access-sandbox-{h:8}-{h:4}-4{h:3}-a{h:3}-{h:12}",
    ),
    ("payment-api-key", "lob-api-key", "live_{h:35}"),
    ("payment-api-key", "adyen-client-key chargebee-access-token", "test_{A:34}"),
    ("adyen-api-key", "adyen-api-key", "AQE{a:6}.{w:64}"),
    ("braintree-key", "braintree-tokenization-key", "sandbox_{a:8}_{a:16}"),
    ("braintree-key", "braintree-access-token", "access_token$production${a:16}"),
    ("duffel-api-token", "duffel-api-token", "duffel_test_{w:43}"),
    ("easypost-api-token", "easypost-api-token", "EZAK{A:54}"),
    ("easypost-api-token", "easypost-test-api-token", "EZTK{A:54}"),
    ("slack-token", "slack-bot-token", "xoxb-{d:12}-{d:13}-{A:24}"),
    ("slack-token", "slack-user-token", "xoxp-{d:12}-{d:12}-{d:13}-{h:32}"),
    ("slack-token", "slack-app-token", "xapp-1-A{U:10}-{d:13}-{h:64}"),
    ("slack-token", "slack-legacy-bot-token", "xoxb-{d:10}-{A:24}"),
    ("slack-token", "slack-legacy-token", "xoxs-{d:10}-{d:10}-{d:12}-{h:64}"),
    ("slack-token", "slack-legacy-workspace-token", "xoxa-2-{A:40}"),
    ("slack-token", "slack-config-access-token", "xoxe.xoxp-1-{U:164}"),
    ("slack-token", "slack-config-refresh-token", "xoxe-1-{U:146}"),
    ("twilio-api-key", "twilio-api-key", "SK{h:32}"),
    ("mailgun-api-key", "mailgun-private-api-token", "key-{h:32}"),
    ("sendinblue-api-key", "sendinblue-api-token", "xkeysib-{h:64}-{A:16}"),
    ("sendgrid-api-key", "sendgrid-api-token", "SG.{w:22}.{w:43}"),
    ("facebook-token", "facebook-page-access-token", "EAAC{A:150}"),
    ("facebook-token", "facebook-access-token", "{d:15}|{w:32}"),
    ("twitter-bearer-token", "twitter-bearer-token", "AAAAAAAAAAAAAAAAAAAAAA{A:90}"),
    ("typeform-api-token", "typeform-api-token", "tfp_{A:59}"),
    ("telegram-bot-token", "telegram-bot-api-token", "{d:10}:AA{w:33}"),
    ("discord-token", "", "MT{A:24}.{A:6}.{w:38}"),
    ("mailchimp-api-key", "mailchimp-api-key", "{h:32}-us12"),
    ("atlassian-api-token", "atlassian-api-token", "ATATT3{w:186}"),
    ("linear-api-key", "linear-api-key", "lin_api_{A:40}"),
    ("notion-token", "notion-api-token", "ntn_{d:11}{A:35}"),
    ("postman-api-key", "postman-api-token", "PMAK-{h:24}-{h:34}"),
    ("figma-token", "", "figd_{w:40}"),
    ("frameio-api-token", "frameio-api-token", "fio-u-{w:64}"),
    ("sentry-token", "sentry-user-token", "sntryu_{h:64}"),
    (
        "sentry-token",
        "sentry-org-token",
        "sntrys_eyJpYXQiO{A:60}LCJyZWdpb25fdXJs{A:40}_{A:43}",
    ),
    ("new-relic-key", "new-relic-user-api-key", "NRAK-{U:27}"),
    ("new-relic-key", "new-relic-insert-key", "NRII-{A:32}"),
    ("new-relic-key", "new-relic-browser-api-token", "NRJS-{h:19}"),
    ("octopus-api-key", "octopus-deploy-api-key", "API-{U:26}"),
    ("adobe-client-secret", "adobe-client-secret", "p8e-{A:32}"),
    ("intra42-client-secret", "intra42-client-secret", "s-s4t2ud-{h:64}"),
    ("settlemint-token", "settlemint-personal-access-token", "sm_pat_{A:16}"),
    ("settlemint-token", "settlemint-application-access-token", "sm_aat_{A:16}"),
    ("settlemint-token", "settlemint-service-access-token", "sm_sat_{A:16}"),
    ("defined-networking-token", "defined-networking-api-token", "dnkey-{A:26}-{A:52}"),
    ("vault-token", "vault-service-token", "hvs.{A:95}"),
    ("vault-token", "vault-batch-token", "hvb.{A:140}"),
    ("doppler-token", "doppler-api-token", "dp.pt.{A:43}"),
    ("dynatrace-token", "dynatrace-api-token", "dt0c01.{U:24}.{U:64}"),
    ("harness-token", "harness-api-key", "pat.{A:22}.{A:24}.{A:20}"),
    ("airtable-token", "airtable-personnal-access-token", "pat{A:14}.{h:64}"),
    ("mapbox-token", "", "sk.eyJ1IjoiZGFuYSIsImEiOiJ{A:20}.{A:22}"),
    ("dropbox-token", "dropbox-short-lived-api-token", "sl.{w:138}"),
    (
        "authress-key",
        "authress-service-client-access-key",
        "sc_{a:12}.{a:5}.acc_{a:20}.{b:45}",
    ),
    ("azure-ad-client-secret", "azure-ad-client-secret", "{A:3}8Q~{w:34}"),
    ("openshift-token", "openshift-user-token", "sha256~{w:43}"),
    ("terraform-token", "hashicorp-tf-api-token", "{a:14}.atlasv1.{w:67}"),
    ("cloudflare-origin-ca-key", "cloudflare-origin-ca-key", "v1.0-{h:24}-{h:146}"),
    ("maxmind-license-key", "maxmind-license-key", "{A:6}_{A:29}_mmk"),
    ("django-secret-key", "django-insecure-secret-key", "django-insecure-{S:50}"),
)

_CLASSES = {
    "a": LOWER_ALNUM,
    "h": HEX,
    "U": UPPER_ALNUM,
    "L": string.ascii_letters,
    "d": string.digits,
    "w": ALNUM + "-_",
    "2": string.ascii_uppercase + "234567",
    "S": ALNUM + "!%&*^(-_=+",
}


def expand(template: str, g: _Gen) -> str:
    """A fake token from ``template`` (see :data:`PROVIDERS`)."""
    if template.startswith("@"):
        name, _, arg = template[1:].partition(":")
        maker = {"github": lambda: github_style(arg, g), "age_key": lambda: age_key(g)}
        return maker.get(name, lambda: jwt_base64(g))()

    def one(m: re.Match[str]) -> str:
        cls, n = m.group(1), int(m.group(2))
        if cls == "A":
            return g.alnum(n)
        if cls in "bu":
            return g.b64(n, url=cls == "u").rstrip("=")
        if cls == "d":
            return g.digits(n)
        return g.s(_CLASSES[cls], n)

    return re.sub(r"\{(\w):(\d+)\}", one, template)


def jwt_base64(g: _Gen) -> str:
    return base64.b64encode(jwt(g).encode()).decode().rstrip("=")


_LINES = (
    "{NAME}={s}",
    "the token is {s} and it expires tomorrow",
    '{{"{name}": "{s}", "region": "eu-west-1"}}',
    "curl -s https://api.example.com/v1/me -H 'Authorization: Bearer {s}'",
    "  {name}: {s}",
    "found {s} in the shell history",
)
_COMMANDS = (
    "export {NAME}={s}",
    "echo {s}",
    "gh secret set {NAME} --body {s}",
    "printf '%s\\n' {s}",
)


def _provider_fakes(g: _Gen) -> list[Fake]:
    out = []
    for i, (kind, _, template) in enumerate(PROVIDERS):
        secret = expand(template, g)
        name = kind.replace("-", "_")
        fill = {"s": secret, "name": name, "NAME": name.upper()}
        line = _LINES[i % len(_LINES)].format(**fill)
        command = _COMMANDS[i % len(_COMMANDS)].format(**fill)
        out.append(Fake(kind, secret, line, command))
    return out


def _shape_fakes(g: _Gen) -> list[Fake]:
    out: list[Fake] = []

    def add(kind: str, secret: str, line: str, command: str) -> None:
        out.append(Fake(kind, secret, line.format(s=secret), command.format(s=secret)))

    for _ in range(2):
        pw = g.password()
        add(
            "url-credentials",
            pw,
            "DATABASE_URL=postgres://app:{s}@db.internal:5432/app",
            "export PGPASSWORD={s}",
        )
        add(
            "url-credentials",
            g.alnum(24),
            "git remote add origin https://deploy:{s}@git.example.com/team/repo.git",
            "export GIT_PASSWORD={s}",
        )
        add(
            "url-credentials",
            g.password(),
            "mongodb+srv://admin:{s}@cluster0.ab12c.mongodb.net/prod?retryWrites=true",
            "export MONGO_PASSWORD={s}",
        )
        add(
            "url-credentials",
            g.alnum(20),
            "redis://:{s}@cache:6379/0",
            "export REDIS_PASSWORD={s}",
        )
        basic = base64.b64encode(f"admin:{g.password()}".encode()).decode()
        add(
            "auth-header",
            basic,
            "Authorization: Basic {s}",
            "curl -s https://ci.example.com/api -H Authorization:\\ Basic\\ {s}",
        )
        add(
            "auth-header",
            g.alnum(40),
            "curl https://api.example.com -H 'X-Api-Key: {s}'",
            "export X_API_KEY={s}",
        )
        add(
            "auth-header", g.alnum(26), "PRIVATE-TOKEN: {s}", "export PRIVATE_TOKEN={s}"
        )
        add("auth-header", g.alnum(32), "X-Auth-Token: {s}", "export AUTH_TOKEN={s}")
        add(
            "cli-secret",
            g.alnum(16),
            "mysql -h db.internal -u root -p{s} prod",
            "mysql -h db.internal -u root -p{s}",
        )
        add(
            "cli-secret",
            g.password(),
            "sshpass -p '{s}' ssh deploy@10.0.0.5",
            "sshpass -p {s}",
        )
        add(
            "cli-secret",
            g.password(),
            "curl -u admin:{s} https://ci.example.com/job",
            "curl -s https://ci.example.com/api/json -u admin:{s}",
        )
        add(
            "cli-secret",
            g.alnum(20),
            "docker login -u bot -p {s} registry.example.com",
            "docker login registry.example.com -u bot -p {s}",
        )
        add(
            "cli-secret",
            g.password(),
            "redis-cli -h cache -a {s} ping",
            "redis-cli -h cache -a {s}",
        )
        add(
            "cli-secret",
            g.password(),
            "openssl rsa -in key.pem -passin pass:{s} -out plain.pem",
            "openssl rsa -in key.pem -out plain.pem -passin pass:{s}",
        )
        add(
            "cli-secret",
            g.password(),
            "mongosh --host db -u admin -p {s} --quiet",
            "mongosh --host db -u admin -p {s}",
        )
        add(
            "cli-secret",
            g.password(),
            "sqlcmd -S db -U sa -P {s} -Q 'select 1'",
            "sqlcmd -S db -U sa -P {s}",
        )
        add(
            "cli-secret",
            g.password(),
            "smbclient //fs/share -U alice%{s} -c ls",
            "smbclient //fs/share -c ls -U alice%{s}",
        )
        add(
            "cli-secret",
            g.password(),
            "twine upload --password {s} dist/*",
            "twine upload dist/* --username __token__ --password {s}",
        )
        add(
            "env-secret",
            g.password(),
            "PGPASSWORD={s} psql -h db -U app",
            "export PGPASSWORD={s}",
        )
        add(
            "env-secret",
            g.password(),
            "MYSQL_PWD={s} mysqldump prod > dump.sql",
            "export MYSQL_PWD={s}",
        )
        add("env-secret", g.password(), "DB_PASSWORD={s}", "export DB_PASSWORD={s}")
        add(
            "env-secret",
            g.password(),
            'database:\n  password: "{s}"\n  host: db',
            "export PASSWORD={s}",
        )
        add(
            "env-secret",
            g.password(),
            "<server><id>nexus</id><password>{s}</password></server>",
            "export NEXUS_PASS={s}",
        )
        add("env-secret", g.hex(64), "WEBHOOK_SECRET={s}", "export WEBHOOK_SECRET={s}")
        add("env-secret", g.hex(32), "DD_API_KEY={s}", "export DD_API_KEY={s}")
        add(
            "env-secret",
            g.alnum(32),
            '{{"client_secret": "{s}", "client_id": "web"}}',
            "export CLIENT_SECRET={s}",
        )
        add("env-secret", g.alnum(24), 'api_key = "{s}"', "export SERVICE_API_KEY={s}")
        # (issue 28) a password under a name that says nothing (X9_ACCESS=) is
        # no longer redacted: a value is a secret by a rule with context,
        # never for looking random; kept here, unused, so the seed holds
        g.password() + g.digits(3)
        add(
            "env-secret",
            g.password(),
            '<add key="ClearTextPassword" value="{s}" />',
            "export NUGET_PASSWORD={s}",
        )
        add(
            "aws-secret-key",
            g.s(B64, 40),
            "aws_secret_access_key = {s}",
            "export AWS_SECRET_ACCESS_KEY={s}",
        )
        g.alnum(48)  # (issue 28) a random run in prose: no longer redacted
        token = jwt(g)
        add("jwt", token, "Authorization: Bearer {s}", "export ID_TOKEN={s}")
        add(
            "private-key",
            pem(g, "RSA PRIVATE KEY"),
            "{s}",
            "cat > ~/.ssh/id_rsa <<'EOF'\n{s}",
        )
        add(
            "private-key",
            pem(g, "OPENSSH PRIVATE KEY"),
            "{s}",
            "tee deploy_key <<'EOF'\n{s}",
        )
        add(
            "slack-webhook",
            "https://hooks.slack.com/services/T"
            + g.s(UPPER_ALNUM, 8)
            + "/B"
            + g.s(UPPER_ALNUM, 8)
            + "/"
            + g.alnum(24),
            "SLACK_WEBHOOK_URL={s}",
            "curl -X POST -d @msg.json {s}",
        )
        add(
            "discord-webhook",
            f"https://discord.com/api/webhooks/{g.digits(18)}/" + g.s(ALNUM + "-_", 68),
            "post to {s}",
            "curl -X POST -d @msg.json {s}",
        )
        add(
            "teams-webhook",
            f"https://acme.webhook.office.com/webhookb2/{g.uuid()}@"
            f"{g.uuid()}/IncomingWebhook/{g.hex(32)}/{g.uuid()}",
            "teams: {s}",
            "curl -H 'Content-Type: application/json' -d @card.json {s}",
        )
        add(
            "claude-session-url",
            "https://claude.ai/code/session_" + g.alnum(24),
            "continue at {s}",
            "open {s}",
        )
    return out


def _build() -> list[Fake]:
    g = _Gen(20261201)
    return _provider_fakes(g) + _shape_fakes(g)


SECRETS: list[Fake] = _build()


# -- gitleaks' default rules -----------------------------------------------------------

# Rules that only name the provider in the variable (gitleaks: "[\w.-]{0,50}?
# (?:datadog)... [=:] value"): a name that says key/token/secret/password is
# found by the keyword detector (env-secret). Sample: gitleaks' own shape,
# `<provider>_<word> = "<value>"`. (rule id, provider word, name word,
# alphabet, length)
_NAMED: tuple[tuple[str, str, str, str, int], ...] = (
    ("adafruit-api-key", "adafruit", "key", LOWER_ALNUM + "_-", 32),
    ("airtable-api-key", "airtable", "api_key", LOWER_ALNUM, 17),
    ("algolia-api-key", "algolia", "api_key", LOWER_ALNUM, 32),
    ("alibaba-secret-key", "alibaba", "secret_key", LOWER_ALNUM, 30),
    ("asana-client-secret", "asana", "client_secret", LOWER_ALNUM, 32),
    ("beamer-api-token", "beamer", "api_token", LOWER_ALNUM + "_", 44),
    ("bitbucket-client-secret", "bitbucket", "client_secret", LOWER_ALNUM, 64),
    ("bittrex-access-key", "bittrex", "access_key", LOWER_ALNUM, 32),
    ("bittrex-secret-key", "bittrex", "secret_key", LOWER_ALNUM, 32),
    ("cisco-meraki-api-key", "meraki", "api_key", HEX, 40),
    ("cloudflare-api-key", "cloudflare", "api_key", LOWER_ALNUM + "_-", 40),
    ("cloudflare-global-api-key", "cloudflare", "global_api_key", HEX, 37),
    ("codecov-access-token", "codecov", "token", LOWER_ALNUM, 32),
    ("cohere-api-token", "co", "api_key", ALNUM, 40),
    ("coinbase-access-token", "coinbase", "access_token", LOWER_ALNUM + "_-", 64),
    ("confluent-access-token", "confluent", "access_token", LOWER_ALNUM, 16),
    ("confluent-secret-key", "confluent", "secret_key", LOWER_ALNUM, 64),
    ("contentful-delivery-api-token", "contentful", "delivery_token", ALNUM, 43),
    ("datadog-access-token", "datadog", "app_key", LOWER_ALNUM, 40),
    ("discord-api-token", "discord", "api_token", HEX, 64),
    ("discord-client-secret", "discord", "client_secret", ALNUM + "_-", 32),
    ("droneci-access-token", "droneci", "token", LOWER_ALNUM, 32),
    ("dropbox-api-token", "dropbox", "api_secret", LOWER_ALNUM, 15),
    ("dropbox-long-lived-api-token", "dropbox", "token", LOWER_ALNUM, 64),
    ("etsy-access-token", "etsy", "access_token", LOWER_ALNUM, 24),
    ("facebook-secret", "facebook", "app_secret", HEX, 32),
    ("fastly-api-token", "fastly", "api_token", ALNUM + "_-", 32),
    ("finicity-api-token", "finicity", "api_token", HEX, 32),
    ("finicity-client-secret", "finicity", "client_secret", LOWER_ALNUM, 20),
    ("finnhub-access-token", "finnhub", "token", LOWER_ALNUM, 20),
    ("flickr-access-token", "flickr", "access_token", LOWER_ALNUM, 32),
    ("freshbooks-access-token", "freshbooks", "access_token", LOWER_ALNUM, 64),
    ("gitter-access-token", "gitter", "token", LOWER_ALNUM + "_-", 40),
    ("gocardless-api-token", "gocardless", "access_token", LOWER_ALNUM, 40),
    ("heroku-api-key", "heroku", "api_key", "uuid", 36),
    ("hubspot-api-key", "hubspot", "api_key", "UUID", 36),
    ("intercom-api-key", "intercom", "access_token", ALNUM + "_-", 60),
    ("jfrog-api-key", "artifactory", "api_key", LOWER_ALNUM, 73),
    ("jfrog-identity-token", "jfrog", "identity_token", LOWER_ALNUM, 64),
    ("kraken-access-token", "kraken", "api_secret", ALNUM + "/+=", 88),
    ("kucoin-access-token", "kucoin", "api_key", HEX, 24),
    ("kucoin-secret-key", "kucoin", "api_secret", "uuid", 36),
    ("launchdarkly-access-token", "launchdarkly", "access_token", ALNUM + "_-", 40),
    ("linear-client-secret", "linear", "client_secret", HEX, 32),
    ("linkedin-client-secret", "linkedin", "client_secret", LOWER_ALNUM, 16),
    ("looker-client-secret", "looker", "client_secret", LOWER_ALNUM, 24),
    ("mailgun-signing-key", "mailgun", "webhook_signing_key", "mailgun", 50),
    ("mattermost-access-token", "mattermost", "access_token", LOWER_ALNUM, 26),
    ("messagebird-api-token", "messagebird", "access_key", LOWER_ALNUM, 25),
    ("netlify-access-token", "netlify", "auth_token", LOWER_ALNUM + "_-", 43),
    ("nytimes-access-token", "nytimes", "api_key", ALNUM + "_-", 32),
    ("okta-access-token", "okta", "api_token", "okta", 42),
    ("plaid-secret-key", "plaid", "secret", LOWER_ALNUM, 30),
    ("privateai-api-token", "privateai", "api_key", LOWER_ALNUM, 32),
    ("rapidapi-access-token", "rapidapi", "key", LOWER_ALNUM + "_-", 50),
    ("sendbird-access-token", "sendbird", "api_token", HEX, 40),
    ("sentry-access-token", "sentry", "auth_token", HEX, 64),
    ("sidekiq-secret", "bundle_enterprise__contribsys__com", "pass", "sidekiq", 17),
    ("snyk-api-token", "snyk", "token", "uuid", 36),
    ("sonar-api-token", "sonar", "token", LOWER_ALNUM, 40),
    ("squarespace-access-token", "squarespace", "api_key", "uuid", 36),
    ("sumologic-access-token", "sumo", "access_key", LOWER_ALNUM, 64),
    ("travisci-access-token", "travis", "api_token", LOWER_ALNUM, 22),
    ("twitch-api-token", "twitch", "client_secret", LOWER_ALNUM, 30),
    ("twitter-access-secret", "twitter", "access_secret", LOWER_ALNUM, 45),
    ("twitter-access-token", "twitter", "access_token", "twitter", 50),
    ("twitter-api-key", "twitter", "api_key", LOWER_ALNUM, 25),
    ("twitter-api-secret", "twitter", "api_secret", LOWER_ALNUM, 50),
    ("zendesk-secret-key", "zendesk", "api_token", LOWER_ALNUM, 40),
    ("yandex-aws-access-token", "yandex", "access_key_secret", "yc", 40),
    ("generic-api-key", "service", "api_key", ALNUM, 32),
    ("database-password", "db", "password", "password", 16),
    ("hashicorp-tf-password", "administrator_login", "password", LOWER_ALNUM, 16),
    ("kubernetes-secret-yaml", "", "password", "b64", 24),
)


def _named_value(g: _Gen, alphabet: str, n: int) -> str:
    special: dict[str, Callable[[], str]] = {
        "uuid": g.uuid,
        "UUID": lambda: g.uuid().upper(),
        "mailgun": lambda: f"{g.s('abcdefgh0123456789', 32)}-{g.hex(8)}-{g.hex(8)}",
        "okta": lambda: "00" + g.alnum(40),
        "yc": lambda: "YC" + g.s(ALNUM + "-_", 38),
        "sidekiq": lambda: f"{g.hex(8)}:{g.hex(8)}",
        "twitter": lambda: f"{g.digits(18)}-{g.alnum(31)}",
        "password": g.password,
        "b64": lambda: base64.b64encode(g.password().encode()).decode(),
    }
    if alphabet in special:
        return special[alphabet]()
    while True:  # values with a digit, as real ones have
        out = g.s(alphabet, n)
        if any(c.isdigit() for c in out):
            return out


def _gitleaks_samples() -> dict[str, tuple[str, str, str]]:
    """rule id -> (text, secret, kind): one sample per covered rule."""
    g = _Gen(7)
    out: dict[str, tuple[str, str, str]] = {}
    for kind, ids, template in PROVIDERS:
        secret = expand(template, g)
        for rule in ids.split():
            out[rule] = (f"found {secret} in the logs", secret, kind)
    for rule, provider, word, alphabet, n in _NAMED:
        value = _named_value(g, alphabet, n)
        name = f"{provider}_{word}".strip("_")
        out[rule] = (f'{name} = "{value}"', value, "env-secret")
    pw, tok, h8 = g.password(), g.alnum(40), g.hex(8)
    slack = f"T{g.s(UPPER_ALNUM, 8)}/B{g.s(UPPER_ALNUM, 8)}/{g.alnum(24)}"
    teams = f"{g.uuid()}@{g.uuid()}/IncomingWebhook/{g.hex(32)}/{g.uuid()}"
    shapes = (
        ("curl-auth-header", f"curl -H 'Authorization: Bearer {tok}' x", "auth-header"),
        ("curl-auth-user", f"curl -u admin:{pw} https://x", "cli-secret"),
        ("freemius-secret-key", f"'secret_key' => 'sk_{g.alnum(29)}'", "env-secret"),
        ("nuget-config-password", f'<add key="Password" value="{pw}"/>', "env-secret"),
        ("sidekiq-sensitive-url", f"https://{h8}:{h8}@gems.contribsys.com/", "url"),
        ("jwt", f"token={jwt(g)}", "jwt"),
        ("private-key", pem(g, "PRIVATE KEY"), "private-key"),
        ("aws-secret-access-key", expand("AKIA{2:16} ", g) + g.s(B64, 40), "aws"),
        ("slack-webhook-url", f"https://hooks.slack.com/services/{slack}", "slack"),
        (
            "microsoft-teams-webhook",
            f"https://a.webhook.office.com/webhookb2/{teams}",
            "",
        ),
        ("claude-code-session-url", f"https://claude.ai/code/session_{tok}", ""),
        ("gitlab-session-cookie", f"_gitlab_session={g.s(LOWER_ALNUM, 32)}", "gitlab"),
        ("datafactory-shir-token", f"IR@{g.uuid()}@adf-001@we@{g.b64(33)}", "left"),
    )
    short = {
        "url": "url-credentials",
        "aws": "aws-secret-key",
        "slack": "slack-webhook",
        "gitlab": "gitlab-token",
        "entropy": "high-entropy",
        "": "",
    }
    kinds = {
        "microsoft-teams-webhook": "teams-webhook",
        "claude-code-session-url": "claude-session-url",
    }
    for rule, text, kind in shapes:
        if kind != "left":
            out[rule] = (text, "", kinds.get(rule) or short.get(kind, kind))
    return out


GITLEAKS_SAMPLES = _gitleaks_samples()

# Rules left out on purpose, and why.
LEFT_OUT: dict[str, str] = {
    "datafactory-shir-token": "found only by its randomness before issue 28; "
    "no engine rule and no context says it is a key",
    "adobe-client-id": "an OAuth client id is public: browsers see it",
    "asana-client-id": "an OAuth client id is public: browsers see it",
    "bitbucket-client-id": "an OAuth client id is public: browsers see it",
    "discord-client-id": "an application id is public",
    "linkedin-client-id": "an OAuth client id is public: browsers see it",
    "looker-client-id": "an OAuth client id is public: browsers see it",
    "messagebird-client-id": "a client id is public",
    "plaid-client-id": "a client id is public",
    "sendbird-access-id": "an application id, not a credential",
    "sumologic-access-id": "an access id names the key, the key is the secret",
    "flutterwave-public-key": "a public key, meant to be published",
    "lob-pub-api-key": "a publishable key, meant to be published",
    "mailgun-pub-key": "a public validation key, meant to be published",
    "mapbox-api-token": "pk. tokens are public; the secret sk. tokens are covered",
    "pkcs12-file": "matches file names (.p12/.pfx), not text",
    "ansible-vault-token": "vault ciphertext: safe to share without the password",
    "new-relic-user-api-id": "named an id (user_api_key_id): an id, not the key",
}

# Every rule id of gitleaks' default configuration: config/gitleaks.toml and the
# rules of cmd/generate/config/rules/ in gitleaks/gitleaks, read in December 2026.
GITLEAKS_RULE_IDS = frozenset(
    (  # noqa: SIM905 (one long string reads better than 240 lines)
        "1password-secret-key 1password-service-account-token adafruit-api-key "
        "adobe-client-id adobe-client-secret adyen-api-key adyen-client-key "
        "age-secret-key airtable-api-key airtable-personnal-access-token "
        "algolia-api-key alibaba-access-key-id alibaba-secret-key "
        "ansible-vault-token anthropic-admin-api-key anthropic-api-key "
        "artifactory-api-key artifactory-reference-token asana-client-id "
        "asana-client-secret atlassian-api-token authress-service-client-access-key "
        "aws-access-token aws-amazon-bedrock-api-key-long-lived "
        "aws-amazon-bedrock-api-key-short-lived aws-secret-access-key "
        "azure-ad-client-secret beamer-api-token bitbucket-client-id "
        "bitbucket-client-secret bittrex-access-key bittrex-secret-key "
        "braintree-access-token braintree-tokenization-key castai-api-key "
        "chargebee-access-token chieftools-access-token chieftools-pat "
        "chieftools-refresh-token cisco-meraki-api-key claude-code-oauth-token "
        "claude-code-session-url clickhouse-cloud-api-secret-key clojars-api-token "
        "cloudflare-api-key cloudflare-global-api-key cloudflare-origin-ca-key "
        "codecov-access-token cohere-api-token coinbase-access-token "
        "confluent-access-token confluent-secret-key contentful-delivery-api-token "
        "curl-auth-header curl-auth-user database-password databricks-api-token "
        "datadog-access-token datafactory-shir-token defined-networking-api-token "
        "digitalocean-access-token digitalocean-pat digitalocean-refresh-token "
        "discord-api-token discord-client-id discord-client-secret "
        "django-insecure-secret-key doppler-api-token droneci-access-token "
        "dropbox-api-token dropbox-long-lived-api-token "
        "dropbox-short-lived-api-token duffel-api-token dynatrace-api-token "
        "easypost-api-token easypost-test-api-token etsy-access-token "
        "facebook-access-token facebook-page-access-token facebook-secret "
        "fastly-api-token finicity-api-token finicity-client-secret "
        "finnhub-access-token flickr-access-token flutterwave-encryption-key "
        "flutterwave-public-key flutterwave-secret-key flyio-access-token "
        "frameio-api-token freemius-secret-key freshbooks-access-token gcp-api-key "
        "generic-api-key github-app-token github-fine-grained-pat github-oauth "
        "github-pat github-refresh-token gitlab-cicd-job-token gitlab-deploy-token "
        "gitlab-feature-flag-client-token gitlab-feed-token "
        "gitlab-incoming-mail-token gitlab-kubernetes-agent-token "
        "gitlab-oauth-app-secret gitlab-pat gitlab-pat-routable gitlab-ptt "
        "gitlab-rrt gitlab-runner-authentication-token "
        "gitlab-runner-authentication-token-routable gitlab-scim-token "
        "gitlab-session-cookie gitter-access-token gocardless-api-token "
        "grafana-api-key grafana-cloud-api-token grafana-service-account-token "
        "groq-api-key harness-api-key hashicorp-tf-api-token hashicorp-tf-password "
        "heroku-api-key heroku-api-key-v2 hubspot-api-key huggingface-access-token "
        "huggingface-organization-api-token infracost-api-token intercom-api-key "
        "intra42-client-secret jfrog-api-key jfrog-identity-token jwt jwt-base64 "
        "kraken-access-token kubernetes-secret-yaml kucoin-access-token "
        "kucoin-secret-key langsmith-api-key launchdarkly-access-token "
        "linear-api-key linear-client-secret linkedin-client-id "
        "linkedin-client-secret lob-api-key lob-pub-api-key looker-client-id "
        "looker-client-secret mailchimp-api-key mailgun-private-api-token "
        "mailgun-pub-key mailgun-signing-key mapbox-api-token "
        "mattermost-access-token maxmind-license-key messagebird-api-token "
        "messagebird-client-id microsoft-teams-webhook netlify-access-token "
        "new-relic-browser-api-token new-relic-insert-key new-relic-user-api-id "
        "new-relic-user-api-key notion-api-token npm-access-token "
        "nuget-config-password nytimes-access-token octopus-deploy-api-key "
        "okta-access-token openai-api-key openshift-user-token perplexity-api-key "
        "pkcs12-file plaid-api-token plaid-client-id plaid-secret-key "
        "planetscale-api-token planetscale-oauth-token planetscale-password "
        "postman-api-token prefect-api-token private-key privateai-api-token "
        "pulumi-api-token pypi-upload-token rapidapi-access-token readme-api-token "
        "rubygems-api-token scalingo-api-token sendbird-access-id "
        "sendbird-access-token sendgrid-api-token sendinblue-api-token "
        "sentry-access-token sentry-org-token sentry-user-token "
        "settlemint-application-access-token settlemint-personal-access-token "
        "settlemint-service-access-token shippo-api-token shopify-access-token "
        "shopify-custom-access-token shopify-private-app-access-token "
        "shopify-shared-secret sidekiq-secret sidekiq-sensitive-url slack-app-token "
        "slack-bot-token slack-config-access-token slack-config-refresh-token "
        "slack-legacy-bot-token slack-legacy-token slack-legacy-workspace-token "
        "slack-user-token slack-webhook-url snyk-api-token sonar-api-token "
        "sourcegraph-access-token square-access-token squarespace-access-token "
        "stripe-access-token sumologic-access-id sumologic-access-token "
        "telegram-bot-api-token travisci-access-token twilio-api-key "
        "twitch-api-token twitter-access-secret twitter-access-token twitter-api-key "
        "twitter-api-secret twitter-bearer-token typeform-api-token "
        "vault-batch-token vault-service-token yandex-access-token yandex-api-key "
        "yandex-aws-access-token zendesk-secret-key "
    ).split()
)

# What a gitleaks rule id maps to here: the kind that covers it.
GITLEAKS: dict[str, str] = {rule: s[2] for rule, s in GITLEAKS_SAMPLES.items()}

# detect-secrets' plugins (detect_secrets/plugins/), the same way.
DETECT_SECRETS: dict[str, str] = {
    "ArtifactoryDetector": "artifactory-token",
    "AWSKeyDetector": "aws-access-key",
    "AzureStorageKeyDetector": "env-secret",
    "BasicAuthDetector": "url-credentials",
    "CloudantDetector": "url-credentials",
    "DiscordBotTokenDetector": "discord-token",
    "GitHubTokenDetector": "github-token",
    "GitLabTokenDetector": "gitlab-token",
    "HexHighEntropyString": "env-secret",
    "IbmCloudIamDetector": "env-secret",
    "IbmCosHmacDetector": "env-secret",
    "JwtTokenDetector": "jwt",
    "KeywordDetector": "env-secret",
    "MailchimpDetector": "mailchimp-api-key",
    "NpmDetector": "npm-token",
    "OpenAIDetector": "openai-api-key",
    "PrivateKeyDetector": "private-key",
    "PypiTokenDetector": "pypi-token",
    "SendGridDetector": "sendgrid-api-key",
    "SlackDetector": "slack-token",
    "SoftlayerDetector": "softlayer-api-key",
    "SquareOAuthDetector": "square-token",
    "StripeDetector": "stripe-key",
    "TelegramBotTokenDetector": "telegram-bot-token",
    "TwilioKeyDetector": "twilio-api-key",
}
DETECT_SECRETS_LEFT_OUT = {
    "Base64HighEntropyString": "a random-looking string is not a secret by its "
    "looks alone (issue 28): digests, ids and public keys are as random",
    "IPPublicDetector": "an IP address is not a credential",
    "HexHighEntropyString (bare)": "a bare hex string is a digest or a git SHA; "
    "hex is redacted only under a secret's name",
}


def _detect_secrets_samples() -> dict[str, str]:
    g = _Gen(11)
    by_kind = {f.kind: f.line for f in _provider_fakes(_Gen(12))}
    return {
        "AzureStorageKeyDetector": f"DefaultEndpointsProtocol=https;AccountName=acme;"
        f"AccountKey={g.b64(64)}",
        "BasicAuthDetector": f"https://admin:{g.password()}@ci.example.com/",
        "CloudantDetector": f"https://acme:{g.hex(64)}@acme.cloudant.com",
        "Base64HighEntropyString": f"salt {g.alnum(44)}",
        "HexHighEntropyString": f"SECRET_KEY={g.hex(64)}",
        "IbmCloudIamDetector": f"ibm_cloud_iam_api_key: {g.s(ALNUM + '_-', 44)}",
        "IbmCosHmacDetector": f"secret_access_key = {g.hex(48)}",
        "JwtTokenDetector": f"id_token: {jwt(g)}",
        "KeywordDetector": f'password = "{g.password()}"',
        "PrivateKeyDetector": pem(g, "EC PRIVATE KEY"),
        "SoftlayerDetector": "https://api.softlayer.com/soap/v3/"
        + g.s(LOWER_ALNUM, 64),
        **{
            name: by_kind[kind]
            for name, kind in DETECT_SECRETS.items()
            if kind in by_kind and name not in ("AWSKeyDetector",)
            and name not in (
                "AzureStorageKeyDetector", "BasicAuthDetector", "CloudantDetector",
                "Base64HighEntropyString", "HexHighEntropyString",
                "IbmCloudIamDetector", "IbmCosHmacDetector", "JwtTokenDetector",
                "KeywordDetector", "PrivateKeyDetector", "SoftlayerDetector",
            )
        },
        "AWSKeyDetector": f"aws_access_key_id = AKIA{g.s(UPPER_ALNUM, 16)}",
    }  # fmt: skip


DETECT_SECRETS_SAMPLES = _detect_secrets_samples()


# -- look-alikes ---------------------------------------------------------------------

_PROSE = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Deploy the new build to staging first, then run the smoke tests.",
    "Remember to rotate the logs every night and keep them for a week.",
    "This function returns the number of rows that match the filter.",
    "Hello world, this is a plain sentence encoded for transport only.",
)
_IMAGE_MAGIC = (
    ("png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
    ("jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"),
    ("gif", b"GIF89a\x10\x00\x10\x00"),
    ("webp", b"RIFF\x24\x00\x00\x00WEBPVP8 "),
)


def _lookalikes() -> list[tuple[str, str]]:
    """(category, text): strings that look like secrets and are not."""
    g = _Gen(424242)
    out: list[tuple[str, str]] = []

    def add(category: str, *texts: str) -> None:
        out.extend((category, t) for t in texts)

    for _ in range(3):
        sha, sha2 = g.hex(40), g.hex(40)
        add(
            "git-sha",
            f"commit {sha}\nAuthor: Dana <dana@example.com>",
            f"git checkout {sha}",
            f'"sha": "{sha}", "parents": ["{sha2}"]',
            f"GIT_COMMIT={sha}",
            f"revision: {sha}",
            f"HEAD is now at {sha[:7]} Fix the flaky test",
            f"{sha}\trefs/heads/main",
            f'"gitHead": "{sha}"',
            f'resolved "git+https://github.com/acme/lib.git#{sha}"',
            f"Merge: {sha[:7]} {sha2[:7]}",
        )
        u = g.uuid()
        add(
            "uuid",
            f'"id": "{u}"',
            f"request_id={u}",
            f"X-Request-Id: {u}",
            f"trace_id: {u}",
            f"GET /api/v1/users/{u}/settings 200",
            f"session {u} closed after 30s",
            f"CORRELATION_ID={u}",
            f'{{"run_id": "{u}", "status": "done"}}',
        )
        digest = base64.b64encode(bytes(g.rng.randrange(256) for _ in range(64)))
        h64, h40 = g.hex(64), g.hex(40)
        add(
            "integrity",
            f'"integrity": "sha512-{digest.decode()}"',
            f"  integrity sha512-{digest.decode()}",
            f"    resolution: {{integrity: sha512-{digest.decode()}}}",
            f"github.com/acme/lib v1.2.{g.rng.randrange(9)} h1:{g.b64(32)}",
            f'checksum = "{h64}"',
            f'{{file = "pkg-1.0-py3-none-any.whl", hash = "sha256:{h64}"}}',
            f"requests==2.32.3 --hash=sha256:{h64}",
            f"Digest: sha256:{h64}",
            f"image: ghcr.io/acme/app@sha256:{h64}",
            f'<script src="app.js" integrity="sha384-{g.b64(48)}"></script>',
            f'"shasum": "{h40}"',
            f"{g.hex(32)}  dist/app.tar.gz",
            f'ETag: "{g.hex(32)}"',
            f"hash = sha256-{g.b64(32)}",
        )
        for name, magic in _IMAGE_MAGIC:
            blob = base64.b64encode(
                magic + bytes(g.rng.randrange(256) for _ in range(120))
            )
            add(
                "image-data",
                f"data:image/{name};base64,{blob.decode()}",
                f'{{"type": "image", "mimeType": "image/{name}", '
                f'"data": "{blob.decode()}"}}',
            )
        for sentence in _PROSE:
            b = base64.b64encode(sentence.encode()).decode()
            add("base64-prose", f"echo {b} | base64 -d", f"decoded {b} to text")
        add(
            "typed-id",
            f'"id": "toolu_01{g.alnum(22)}"',
            f'"id": "msg_01{g.alnum(22)}"',
            f'"id": "chatcmpl-{g.alnum(29)}"',
            f'"tool_call_id": "call_{g.alnum(24)}"',
            f"request-id: req_{g.alnum(24)}",
            f'"customer": "cus_{g.alnum(14)}"',
            f'"payment_intent": "pi_{g.alnum(24)}"',
            f'"file_id": "file-{g.alnum(24)}"',
            f'"run": "run_{g.alnum(24)}"',
            f'"assistant_id": "asst_{g.alnum(24)}"',
            f'"thread_id": "thread_{g.alnum(24)}"',
            f'"batch_id": "batch_{g.alnum(24)}"',
            f"model: ft:gpt-4o-mini:acme::{g.alnum(8)}",
        )
    add(
        "code",
        "self.assertEqual(response.status_code, 200)",
        "def handleUserProfileUpdate2(self, request):",
        "document.getElementsByTagName('script')",
        "tests/test_module_42.py::test_handles_unicode_input_values PASSED",
        "import org.springframework.boot.autoconfigure.SpringBootApplication;",
        '<div class="css-1q2w3e4 MuiBox-root">',
        "static/js/2.8a7c8b1e.chunk.js",
        "main.3f9a8c2b.js.map",
        "ConfigurationManagerFactoryImpl3.getInstance()",
        "assertAlmostEqualWithTolerance10(actual, expected)",
        "MAX_RETRY_COUNT_FOR_UPLOAD_2 = 5",
        "color: #3f9a8c; background: #ffffff;",
        "crc = 0x1c291ca3",
        "expected 5d41402abc4b2a76b9719d911017c592 got 0",
        "node_modules/.pnpm/react-dom@18.3.1_react@18.3.1/node_modules/react-dom",
        "export const selectVisibleTodosByFilter2 = createSelector(",
        'Traceback (most recent call last):\n  File "app/main.py", line 42, in run',
        "kubectl get pods -n prod\nweb-7d9c8f6b5-x2x9q   1/1   Running   0   3d",
    )
    add(
        "names-without-values",
        'password = os.environ["DB_PASSWORD"]',
        'token = request.headers.get("Authorization")',
        "api_key: str = Field(..., description='the provider key')",
        "def login(username: str, password: str) -> Token:",
        "secret = getpass.getpass('Vault password: ')",
        "PASSWORD=${DB_PASSWORD}",
        'password: "{{ vault_db_password }}"',
        'api_key=os.getenv("OPENAI_API_KEY")',
        "export GITHUB_TOKEN=$(gh auth token)",
        "AWS_SECRET_ACCESS_KEY: ${{ secrets.AWS_SECRET_ACCESS_KEY }}",
        "echo $PW | docker login --username bot --password-stdin",
        "token_count: 1532",
        "max_tokens=4096",
        '"usage": {"input_tokens": 1234, "output_tokens": 567}',
        "KeyError: 'user_id'",
        "id = Column(Integer, primary_key=True)",
        "public_key = load_pem_public_key(data)",
        "json.dumps(row, sort_keys=True)",
        "auth_method: oauth2",
        "password_min_length: 12",
        "if token is None:\n    raise AuthError('missing token')",
        "headers = {'Authorization': f'Bearer {token}'}",
        "mysql -u root -p prod < dump.sql",
        "ssh -p 2222 deploy@host",
        "docker run -p 8080:80 -u 1000:1000 nginx",
        "git push -u origin feature/login-form",
        "docker run -u app:staff -v $PWD:/src node:20 npm test",
        "docker exec --user www-data:www-data web php artisan migrate",
        "python -m pytest -p no:cacheprovider -q tests/",
        "tar -pczf backup-2026-11-29.tgz ./data",
        "kubectl logs -p web-7d9c8f6b5-x2x9q --tail 50",
        "pip install -U pip setuptools wheel",
        "psql -U postgres -d app -c 'select count(*) from users'",
        "scp -P 2222 build.tgz deploy@10.0.0.5:/srv/app/",
        "mkdir -p build/dist/assets2024",
    )
    add(
        "placeholder",
        "API_KEY=your-api-key-here",
        "OPENAI_API_KEY=<your key>",
        "password: changeme",
        "TOKEN=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "SECRET_KEY=replace-me",
        "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "AKIAXXXXXXXXXXXXXXXX",
        "sk_test_XXXXXXXXXXXXXXXXXXXXXXXX",
        "Authorization: Bearer <token>",
        "postgres://user:${PGPASSWORD}@localhost/db",
        "https://user:$TOKEN@github.com/acme/repo.git",
        "redis://:@localhost:6379/0",
        "DB_PASSWORD=",
        "curl -u $USER:$PASS https://ci.example.com",
        'sshpass -p "$SSHPASS" ssh host',
        "mysql -u root -p$MYSQL_ROOT_PASSWORD",
    )
    add(
        "shaped-value",
        "VERSION=1.2.3-beta.4+build.567",
        "2026-11-29T19:04:27.682Z",
        "timestamp: 1795979067709",
        "host 10.0.12.7 port 5432",
        "inet6 2001:db8::8a2e:370:7334",
        "ether 00:1a:2b:3c:4d:5e",
        "ULID 01ARZ3NDEKTSV4RRFFQ69G5FAV",
        '"_id": {"$oid": "507f1f77bcf86cd799439011"}',
        "s3://acme-reports/uploads/2026/11/29/report-final-v2.pdf",
        "arn:aws:iam::123456789012:role/deploy-prod-2024",
        "LANG=en_US.UTF-8",
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "TZ=America/New_York",
        "NODE_OPTIONS=--max-old-space-size=4096",
        "PYTHONHASHSEED=0",
        "call +1 (415) 555-0134",
        "dana.dev+test@example.com",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + g.alnum(43) + " dana@laptop",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ" + g.alnum(60) + " ci@runner",
        "-----BEGIN CERTIFICATE-----\nMIID"
        + g.b64(600)
        + "\n-----END CERTIFICATE-----",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjAN"
        + g.b64(200)
        + "\n-----END PUBLIC KEY-----",
        "gpg: key 3AA5C34371567BD2: public key imported",
        "Fingerprint: 9F2E 1C3A 7B4D 0E5F 6A8B  2C1D 3E4F 5A6B 7C8D 9E0F",
        "image: postgres:16.4-alpine3.20",
        "python:3.11.7-slim-bookworm",
        "K8S_POD=api-server-5f7d8c9b4-qk2lm",
        "BUILD_ID=20261129.7",
        "sourceMappingURL=data:application/json;base64," + g.b64(90),
        '<meta name="csrf-token" content="' + g.alnum(40) + '">',
        "page=2&per_page=100&sort=created_at&direction=desc",
        "watch?v=dQw4w9WgXcQ&t=42s",
        "AKIAIOSFODNN7EXAMPLE is the key id used in the AWS docs",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY (the AWS documentation's example)",
    )
    return out


LOOKALIKES = _lookalikes()


def _fixture_lookalikes() -> list[tuple[str, str]]:
    path = Path(__file__).parents[1] / "fixtures" / "secrets" / "lookalikes.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [(r["category"], r["text"].replace("{{JOIN}}", "")) for r in rows]


LOOKALIKES += _fixture_lookalikes()

# The look-alikes the scanner does redact, and why: a published example key
# has the exact shape of a real one. (Since issue 28 a random value with no
# context, such as a CSRF token, is kept.)
EXPECTED_REDACTED: dict[str, str] = {
    "AKIAIOSFODNN7EXAMPLE is the key id used in the AWS docs": "the AWS "
    "documentation's example key id has the exact shape of a real one "
    "(published example keys may be redacted)",
}


# -- tests --------------------------------------------------------------------------


def _covered(text: str, secret: str, kind: str) -> bool:
    """Is all of ``secret`` in ``text`` covered by findings?

    Of any kind: since issue 28 the engine's rule names win over machine's
    (``github-pat`` for ``github-token``), and ``kind`` only says which of
    machine's own rules would find it alone.
    """
    findings = scan_text(text)
    if not secret:
        return bool(findings)
    start = text.index(secret)
    end = start + len(secret)
    over = [f for f in findings if f.start < end and start < f.end]
    if not over:
        return False
    pos = start
    for f in over:  # contiguous from the secret's start to its end
        if f.start > pos:
            return False
        pos = max(pos, f.end)
    return pos >= end


def test_the_corpus_is_big_and_varied() -> None:
    assert len(SECRETS) >= 150
    assert len({f.kind for f in SECRETS}) >= 40
    assert {f.kind for f in SECRETS} <= KINDS
    assert len({f.secret for f in SECRETS}) == len(SECRETS)
    for fake in SECRETS:
        assert fake.secret in fake.line, fake
        assert fake.command.endswith(fake.secret), fake


def test_the_github_style_checksum_is_the_crc32_of_the_body() -> None:
    token = next(f.secret for f in SECRETS if f.secret.startswith("ghp_"))
    body, check = token[4:34], token[34:]
    assert check == _b62(zlib.crc32(body.encode())).rjust(6, "0")


@pytest.mark.parametrize(
    "fake", SECRETS, ids=[f"{i:03d}-{f.kind}" for i, f in enumerate(SECRETS)]
)
def test_each_fake_is_found_whole_with_its_kind(fake: Fake) -> None:
    assert _covered(fake.line, fake.secret, fake.kind), scan_text(fake.line)


@pytest.mark.parametrize(
    "fake", SECRETS, ids=[f"{i:03d}-{f.kind}" for i, f in enumerate(SECRETS)]
)
def test_a_secret_ending_a_command_is_removed_even_in_json(fake: Fake) -> None:
    args = json.dumps({"command": fake.command})
    twice = json.dumps({"arguments": args})  # a tool call's JSON, quoted again
    for text in (fake.command, args, twice):
        redacted, counts = redact_text(text)
        assert fake.secret not in redacted, (text, counts)
        assert counts


def test_every_gitleaks_rule_is_covered_or_left_out_with_a_reason() -> None:
    assert len(GITLEAKS_RULE_IDS) >= 240
    assert set(GITLEAKS) | set(LEFT_OUT) == GITLEAKS_RULE_IDS
    assert not set(GITLEAKS) & set(LEFT_OUT)
    assert set(GITLEAKS.values()) <= KINDS
    assert all(len(why) > 20 for why in LEFT_OUT.values())


@pytest.mark.parametrize("rule", sorted(GITLEAKS_SAMPLES))
def test_each_covered_gitleaks_rule_is_found_with_its_kind(rule: str) -> None:
    text, secret, kind = GITLEAKS_SAMPLES[rule]
    assert _covered(text, secret, kind), (text, scan_text(text))


@pytest.mark.parametrize("plugin", sorted(DETECT_SECRETS))
def test_each_detect_secrets_plugin_is_covered(plugin: str) -> None:
    kind = DETECT_SECRETS[plugin]
    assert kind in KINDS
    text = DETECT_SECRETS_SAMPLES[plugin]
    # the kind is the engine's name when its rule finds it too
    assert scan_text(text), text


def test_lookalikes_are_rarely_redacted_and_the_few_are_known() -> None:
    assert len(LOOKALIKES) >= 300
    redacted = {}
    for category, text in LOOKALIKES:
        findings = scan_text(text)
        if findings:
            redacted[text] = (
                category,
                [(f.kind, text[f.start : f.end]) for f in findings],
            )
    assert set(redacted) == set(EXPECTED_REDACTED), redacted
    rate = len(redacted) / len(LOOKALIKES)
    assert rate < 0.02, f"{rate:.1%} of {len(LOOKALIKES)} look-alikes redacted"
