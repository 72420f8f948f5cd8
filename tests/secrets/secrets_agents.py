"""A second, independent secret corpus: what agents leak, and what they must keep.

Written for issue 28 from the provider rule lists of the engines evaluated
there (betterleaks' default configuration, Kingfisher's built-in rules) and
from reading what coding agents print, type and are told: ``.env`` files,
``curl`` headers, client constructors, CLI logins with positional
passwords, ``.netrc``/``.pgpass``, JDBC and database URLs. It shares no
code with ``tests/secrets/test_secrets_corpus.py``: its own generator, templates and
seed, so a scanner tuned on that corpus is measured on new ground here.

Every fake is built at import from a fixed seed (no whole token is written in
this file). None is a real credential.

* :data:`SECRETS`: 200+ fake secrets of 120+ kinds, each with the line that
  holds it as an agent would meet it. ``secret`` is what must never reach
  git; ``line`` the text around it.
* :data:`LOOKALIKES`: 400+ public-by-construction values of 60+ kinds, in
  their usual context (lockfiles, listings, key files, logs): redacting them
  corrupts data a model should learn to write.
"""

# ruff: noqa: E501 -- the tables below are data: whole templates, one a line
from __future__ import annotations

import base64
import hashlib
import random
import re
import string
from typing import NamedTuple

SEED = 28_2026


class Fake(NamedTuple):
    kind: str
    secret: str
    line: str


class Lookalike(NamedTuple):
    kind: str
    value: str
    line: str


_ALNUM = string.ascii_letters + string.digits
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_CLASSES = {
    "A": _ALNUM,
    "a": string.ascii_lowercase + string.digits,
    "U": string.ascii_uppercase + string.digits,
    "h": "0123456789abcdef",
    "H": "0123456789ABCDEF",
    "d": string.digits,
    "l": string.ascii_lowercase,
    "w": _ALNUM + "-_",
    "z": "abcdefghijklmnopqrstuvwxyz234567",  # RFC 4648 base32, lower
    "Z": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "5": _B58,
    "k": "0123456789abcdefghjkmnpqrstvwxyz",  # Crockford, lower (nix)
    "C": "0123456789ABCDEFGHJKMNPQRSTVWXYZ",  # Crockford, upper (ULID)
    "B": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",  # bech32, upper (age)
    "L": string.ascii_letters,
}
_FIELD_RE = re.compile(
    r"\{([AaUhHdlwzZ5kCBL]):(\d+)\}|\{(b|u|pw|uuid|uuid7|s)(?::(\d+))?\}"
)


class Gen:
    """Fills templates: ``{X:n}`` n characters of class X, ``{b:n}`` base64 of
    n random bytes (``u`` url-safe, unpadded), ``{pw}`` a typed password,
    ``{uuid}``, ``{s}`` the secret (in a line template)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, cls: str, n: int) -> str:
        alphabet = _CLASSES[cls]
        while True:
            out = "".join(self.rng.choice(alphabet) for _ in range(n))
            if cls not in "Aw" or n < 12:
                return out
            if any(c.isdigit() for c in out) and out.lower() != out != out.upper():
                return out

    def raw(self, n: int) -> bytes:
        return bytes(self.rng.randrange(256) for _ in range(n))

    def password(self) -> str:
        heads = ("Sunset", "Marlin", "Quartz", "Harbor", "Violet", "Orchid", "Falcon")
        marks = "!#%*@^+?"
        return (
            self.rng.choice(heads)
            + self.rng.choice(marks)
            + self.chars("d", 3)
            + self.chars("A", 5)
        )

    def uuid(self, version: int = 4) -> str:
        h = self.chars("h", 32)
        variant = self.rng.choice("89ab")
        return f"{h[:8]}-{h[8:12]}-{version}{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"

    def fill(self, template: str, secret: str = "") -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(1):
                return self.chars(m.group(1), int(m.group(2)))
            what, n = m.group(3), int(m.group(4) or 0)
            if what == "b":
                return base64.b64encode(self.raw(n)).decode()
            if what == "u":
                return base64.urlsafe_b64encode(self.raw(n)).decode().rstrip("=")
            if what == "pw":
                return self.password()
            if what == "uuid":
                return self.uuid()
            if what == "uuid7":
                return self.uuid(7)
            return secret

        return _FIELD_RE.sub(one, template)


# -- secrets -------------------------------------------------------------------------
# (kind, the secret's template, the line's template: {s} is the secret)
_SECRETS: tuple[tuple[str, str, str], ...] = (
    # AI and ML services
    ("anthropic-api-key", "sk-ant-api03-{w:93}AA", "export ANTHROPIC_API_KEY={s}"),
    (
        "anthropic-api-key",
        "sk-ant-api03-{w:93}AA",
        "curl https://api.anthropic.com/v1/messages -H 'x-api-key: {s}' -d @req.json",
    ),
    ("anthropic-oauth-token", "sk-ant-oat01-{w:93}AA", "CLAUDE_CODE_OAUTH_TOKEN={s}"),
    ("anthropic-admin-key", "sk-ant-admin01-{w:93}AA", "ANTHROPIC_ADMIN_KEY={s}"),
    (
        "openai-project-key",
        "sk-proj-{w:74}T3BlbkFJ{w:74}",
        'client = OpenAI(api_key="{s}")',
    ),
    (
        "openai-project-key",
        "sk-proj-{w:74}T3BlbkFJ{w:74}",
        "OPENAI_API_KEY={s} python run.py",
    ),
    ("openai-legacy-key", "sk-{A:20}T3BlbkFJ{A:20}", "openai.api_key = '{s}'"),
    ("openai-service-key", "sk-svcacct-{w:74}T3BlbkFJ{w:74}", "OPENAI_API_KEY: {s}"),
    ("openai-admin-key", "sk-admin-{w:74}T3BlbkFJ{w:74}", 'OPENAI_ADMIN_KEY="{s}"'),
    ("openrouter-key", "sk-or-v1-{h:64}", "OPENROUTER_API_KEY={s}"),
    ("xai-key", "xai-{A:80}", 'XAI_API_KEY="{s}"'),
    ("groq-key", "gsk_{A:52}", "export GROQ_API_KEY={s}"),
    ("perplexity-key", "pplx-{A:48}", 'headers = {{"Authorization": "Bearer {s}"}}'),
    ("mistral-key", "{A:32}", "MISTRAL_API_KEY={s}"),
    ("cohere-key", "{A:40}", "COHERE_API_KEY={s}"),
    ("huggingface-token", "hf_{L:34}", "huggingface-cli login --token {s}"),
    ("huggingface-token", "hf_{L:34}", "HF_TOKEN={s}"),
    ("replicate-token", "r8_{A:37}", "export REPLICATE_API_TOKEN={s}"),
    ("together-key", "{h:64}", "TOGETHER_API_KEY={s}"),
    ("fireworks-key", "fw_{A:24}", "FIREWORKS_API_KEY={s}"),
    ("deepseek-key", "sk-{h:32}", "DEEPSEEK_API_KEY={s}"),
    ("gemini-key", "AIza{w:35}", "GEMINI_API_KEY={s}"),
    (
        "gemini-key",
        "AIza{w:35}",
        "curl 'https://generativelanguage.googleapis.com/v1beta/models?key={s}'",
    ),
    ("voyage-key", "pa-{w:43}", "VOYAGE_API_KEY={s}"),
    ("jina-key", "jina_{A:60}", "-H 'Authorization: Bearer {s}'"),
    ("jina-key", "jina_{A:60}", "JINA_API_KEY={s}"),
    (
        "deepgram-key",
        "{h:40}",
        "curl -H 'Authorization: Token {s}' https://api.deepgram.com/v1/listen",
    ),
    ("deepgram-key", "{h:40}", "DEEPGRAM_API_KEY={s}"),
    ("assemblyai-key", "{h:32}", 'aai.settings.api_key = "{s}"'),
    (
        "elevenlabs-key",
        "sk_{h:48}",
        "curl -H 'xi-api-key: {s}' https://api.elevenlabs.io/v1/voices",
    ),
    ("langsmith-key", "lsv2_pt_{h:32}_{h:10}", "LANGSMITH_API_KEY={s}"),
    ("tavily-key", "tvly-dev-{A:32}", "TAVILY_API_KEY={s}"),
    ("pinecone-key", "pcsk_{A:5}_{A:64}", "PINECONE_API_KEY={s}"),
    ("wandb-key", "{h:40}", "wandb login {s}"),
    ("wandb-key", "{h:40}", "export WANDB_API_KEY={s}"),
    ("comet-key", "{A:25}", "COMET_API_KEY={s}"),
    ("tinker-key", "tml-{A:48}", "TINKER_API_KEY={s}"),
    ("cerebras-key", "csk-{a:48}", "CEREBRAS_API_KEY={s}"),
    ("anyscale-key", "esecret_{a:24}", "ANYSCALE_API_KEY={s}"),
    # code hosts, registries, CI
    (
        "github-pat",
        "ghp_{A:36}",
        "git remote set-url origin https://{s}@github.com/acme/app.git",
    ),
    ("github-pat", "ghp_{A:36}", "echo {s} | gh auth login --with-token"),
    ("github-fine-grained-pat", "github_pat_{A:22}_{A:59}", "GITHUB_TOKEN={s}"),
    ("github-oauth", "gho_{A:36}", '"oauth_token": "{s}",'),
    (
        "github-app-token",
        "ghs_{A:36}",
        "git clone https://x-access-token:{s}@github.com/acme/app",
    ),
    ("github-refresh-token", "ghr_{A:76}", "refresh_token={s}"),
    (
        "gitlab-pat",
        "glpat-{w:20}",
        "git clone https://oauth2:{s}@gitlab.com/acme/app.git",
    ),
    (
        "gitlab-pat",
        "glpat-{w:20}",
        "curl --header 'PRIVATE-TOKEN: {s}' https://gitlab.com/api/v4/projects",
    ),
    ("gitlab-runner-token", "glrt-{w:20}", "gitlab-runner register --token {s}"),
    (
        "bitbucket-app-password",
        "ATBB{A:32}{H:8}",
        "git clone https://dana:{s}@bitbucket.org/acme/app.git",
    ),
    ("npm-token", "npm_{A:36}", "//registry.npmjs.org/:_authToken={s}"),
    ("npm-token", "npm_{A:36}", "npm config set //registry.npmjs.org/:_authToken {s}"),
    (
        "pypi-token",
        "pypi-AgEIcHlwaS5vcmc{w:60}",
        "twine upload -u __token__ -p {s} dist/*",
    ),
    (
        "pypi-token",
        "pypi-AgEIcHlwaS5vcmc{w:60}",
        "[pypi]\nusername = __token__\npassword = {s}",
    ),
    ("rubygems-key", "rubygems_{h:48}", "GEM_HOST_API_KEY={s}"),
    ("dockerhub-pat", "dckr_pat_{w:27}", "docker login -u dana -p {s}"),
    (
        "azure-devops-pat",
        "{z:52}",
        "git clone https://pat:{s}@dev.azure.com/acme/web/_git/web",
    ),
    ("azure-devops-pat", "{z:52}", "export AZURE_DEVOPS_EXT_PAT={s}"),
    ("sonarqube-token", "squ_{h:40}", "sonar-scanner -Dsonar.token={s}"),
    ("sonarcloud-token", "sqp_{h:40}", "SONAR_TOKEN={s}"),
    (
        "artifactory-key",
        "AKCp{A:69}",
        "curl -H 'X-JFrog-Art-Api: {s}' https://acme.jfrog.io/artifactory/api/repositories",
    ),
    ("sourcegraph-token", "sgp_{h:40}", "SRC_ACCESS_TOKEN={s}"),
    ("buildkite-token", "bkua_{h:40}", "BUILDKITE_API_TOKEN={s}"),
    ("circleci-token", "CCIPAT_{A:22}_{h:40}", "CIRCLECI_TOKEN={s}"),
    (
        "terraform-cloud-token",
        "{A:14}.atlasv1.{w:67}",
        'credentials "app.terraform.io" {{ token = "{s}" }}',
    ),
    ("vercel-token", "{A:24}", "vercel deploy --token {s}"),
    ("netlify-token", "nfp_{A:36}", "NETLIFY_AUTH_TOKEN={s}"),
    ("fly-token", "fo1_{w:43}", "FLY_API_TOKEN={s}"),
    (
        "heroku-key",
        "{uuid}",
        "machine api.heroku.com\n  login dana@example.com\n  password {s}",
    ),
    ("heroku-key", "HRKU-{w:60}", "HEROKU_API_KEY={s}"),
    ("digitalocean-token", "dop_v1_{h:64}", "doctl auth init -t {s}"),
    ("linode-token", "{h:64}", "LINODE_TOKEN={s}"),
    ("cloudflare-api-token", "{w:40}", "CLOUDFLARE_API_TOKEN={s}"),
    (
        "cloudflare-global-key",
        "{h:37}",
        "curl -H 'X-Auth-Email: dana@example.com' -H 'X-Auth-Key: {s}'",
    ),
    # clouds
    # an access key id alone is an identifier (the engine reports it with its
    # secret key only): the pair, as ~/.aws/credentials holds it
    (
        "aws-access-key-id",
        "AKIA{Z:16}",
        "[default]\naws_access_key_id = {s}\naws_secret_access_key = {b:30}",
    ),
    ("aws-secret-access-key", "{b:30}", "aws_secret_access_key = {s}"),
    ("aws-secret-access-key", "{b:30}", "aws configure set aws_secret_access_key {s}"),
    ("aws-session-token", "FwoGZXIvYXdzE{b:180}", "export AWS_SESSION_TOKEN={s}"),
    (
        "gcp-private-key",
        "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{b:120}\\n{b:48}\\n-----END PRIVATE KEY-----",
        '  "private_key": "{s}",',
    ),
    ("gcp-api-key", "AIza{w:35}", "GOOGLE_API_KEY={s}"),
    ("gcp-oauth-secret", "GOCSPX-{w:28}", '"client_secret": "{s}"'),
    (
        "azure-storage-key",
        "{b:64}",
        "DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={s};EndpointSuffix=core.windows.net",
    ),
    ("azure-ad-client-secret", "{A:3}8Q~{w:34}", "AZURE_CLIENT_SECRET={s}"),
    (
        "azure-ad-client-secret",
        "{A:3}8Q~{w:34}",
        "az login --service-principal -u 0b1f7d4e-acme -p {s} --tenant acme.onmicrosoft.com",
    ),
    (
        "azure-sas-signature",
        "{A:43}%3D",
        "https://acme.blob.core.windows.net/data?sv=2022-11-02&ss=b&srt=co&sp=rl&se=2027-01-01T00:00:00Z&sig={s}",
    ),
    ("alibaba-access-key-secret", "{A:30}", "ALIBABA_CLOUD_ACCESS_KEY_SECRET={s}"),
    ("tencent-secret-key", "{A:32}", "TENCENTCLOUD_SECRET_KEY={s}"),
    ("ibm-cloud-key", "{w:44}", "IBMCLOUD_API_KEY={s}"),
    # databases and connection strings
    (
        "oracle-jdbc-password",
        "{pw}",
        "jdbc:oracle:thin:scott/{s}@db.example.com:1521/ORCL",
    ),
    (
        "postgres-url-password",
        "{pw}",
        "DATABASE_URL=postgresql://app:{s}@db.internal:5432/app",
    ),
    ("mysql-jdbc-password", "{pw}", "jdbc:mysql://db:3306/app?user=app&password={s}"),
    (
        "mongodb-url-password",
        "{pw}",
        'mongosh "mongodb+srv://dana:{s}@cluster0.ab1cd.mongodb.net/"',
    ),
    ("redis-url-password", "{pw}", "REDIS_URL=redis://:{s}@cache:6379/0"),
    ("amqp-url-password", "{pw}", "amqp://worker:{s}@rabbit:5672/"),
    ("pgpass-password", "{pw}", "db.example.com:5432:app:app:{s}"),
    ("pgpass-password", "{pw}", "$ cat ~/.pgpass\n*:*:*:postgres:{s}"),
    ("netrc-password", "{pw}", "machine ftp.example.com login dana password {s}"),
    ("netrc-password", "ghp_{A:36}", "machine github.com\nlogin dana\npassword {s}"),
    ("libpq-password", "{pw}", 'psql "host=db user=app password={s} dbname=app"'),
    ("mssql-password", "{pw}", "Server=db;Database=app;User Id=sa;Password={s};"),
    ("spring-password", "{pw}", "spring.datasource.password={s}"),
    ("wp-config-password", "{pw}", "define( 'DB_PASSWORD', '{s}' );"),
    ("wp-config-salt", "{w:64}", "define('AUTH_KEY', '{s}');"),
    ("upstash-token", "A{w:60}", "UPSTASH_REDIS_REST_TOKEN={s}"),
    ("planetscale-password", "pscale_pw_{w:43}", "DATABASE_PASSWORD={s}"),
    ("neon-api-key", "napi_{a:64}", "NEON_API_KEY={s}"),
    ("supabase-access-token", "sbp_{h:40}", "supabase login --token {s}"),
    (
        "supabase-service-key",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJyb2xlIjoic2VydmljZV9yb2xlIiwiaWF0IjoxNzAwMDAwMDAwfQ.{u:32}",
        "SUPABASE_SERVICE_ROLE_KEY={s}",
    ),
    # mail and messaging
    (
        "mailgun-key",
        "key-{h:32}",
        "curl -s --user 'api:{s}' https://api.mailgun.net/v3/mg.acme.dev/messages",
    ),
    ("mailgun-key", "{h:32}-{h:8}-{h:8}", "MAILGUN_API_KEY={s}"),
    ("sendgrid-key", "SG.{w:22}.{w:43}", "SENDGRID_API_KEY={s}"),
    ("mailchimp-key", "{h:32}-us14", "MAILCHIMP_API_KEY={s}"),
    (
        "postmark-token",
        "{uuid}",
        "curl -H 'X-Postmark-Server-Token: {s}' https://api.postmarkapp.com/email",
    ),
    ("brevo-key", "xkeysib-{h:64}-{A:16}", "BREVO_API_KEY={s}"),
    ("resend-key", "re_{A:8}_{A:24}", "RESEND_API_KEY={s}"),
    ("twilio-api-key", "SK{h:32}", "TWILIO_API_KEY={s}"),
    ("twilio-auth-token", "{h:32}", "TWILIO_AUTH_TOKEN={s}"),
    ("slack-bot-token", "xoxb-{d:12}-{d:13}-{A:24}", "SLACK_BOT_TOKEN={s}"),
    (
        "slack-user-token",
        "xoxp-{d:12}-{d:12}-{d:13}-{h:32}",
        'curl -H "Authorization: Bearer {s}" https://slack.com/api/auth.test',
    ),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/T{U:8}/B{U:10}/{A:24}",
        'curl -X POST -d \'{{"text":"hi"}}\' {s}',
    ),
    ("discord-bot-token", "MT{A:24}.{w:6}.{w:38}", "DISCORD_TOKEN={s}"),
    (
        "discord-webhook",
        "{d:18}/{w:68}",
        "WEBHOOK=https://discord.com/api/webhooks/{s}",
    ),
    (
        "telegram-bot-token",
        "{d:10}:AA{w:33}",
        "curl https://api.telegram.org/bot{s}/getMe",
    ),
    (
        "teams-webhook",
        "{uuid}@{uuid}/IncomingWebhook/{h:32}/{uuid}",
        "TEAMS_WEBHOOK_URL=https://acme.webhook.office.com/webhookb2/{s}",
    ),
    ("gmail-app-password", "{l:4} {l:4} {l:4} {l:4}", 'EMAIL_HOST_PASSWORD = "{s}"'),
    ("smtp-password", "{pw}", "SMTP_PASSWORD={s}"),
    # payments and commerce
    ("stripe-secret-key", "sk_live_{A:99}", "STRIPE_SECRET_KEY={s}"),
    (
        "stripe-secret-key",
        "sk_live_{A:99}",
        "curl https://api.stripe.com/v1/charges -u {s}:",
    ),
    ("stripe-restricted-key", "rk_live_{A:99}", 'stripe.api_key = "{s}"'),
    ("stripe-webhook-secret", "whsec_{A:32}", "STRIPE_WEBHOOK_SECRET={s}"),
    ("square-token", "EAAA{w:60}", "SQUARE_ACCESS_TOKEN={s}"),
    (
        "braintree-token",
        "access_token$production${a:16}${h:32}",
        "BRAINTREE_ACCESS_TOKEN={s}",
    ),
    (
        "shopify-token",
        "shpat_{h:32}",
        "curl -H 'X-Shopify-Access-Token: {s}' https://acme.myshopify.com/admin/api/2024-01/shop.json",
    ),
    ("plaid-access-token", "access-production-{uuid}", '"access_token": "{s}"'),
    ("paypal-client-secret", "E{w:79}", "PAYPAL_CLIENT_SECRET={s}"),
    ("coinbase-key-secret", "{b:48}", "COINBASE_API_SECRET={s}"),
    # observability and work tools
    ("sentry-org-token", "sntrys_{u:120}", "SENTRY_AUTH_TOKEN={s}"),
    (
        "sentry-user-token",
        "sntryu_{h:64}",
        "sentry-cli --auth-token {s} releases new 1.2.0",
    ),
    ("datadog-api-key", "{h:32}", "DD_API_KEY={s}"),
    (
        "datadog-app-key",
        "{h:40}",
        "curl -H 'DD-APPLICATION-KEY: {s}' https://api.datadoghq.com/api/v1/validate",
    ),
    ("newrelic-user-key", "NRAK-{U:27}", "NEW_RELIC_API_KEY={s}"),
    ("newrelic-license-key", "{h:36}NRAL", "NEW_RELIC_LICENSE_KEY={s}"),
    (
        "honeycomb-key",
        "{A:22}",
        "curl -H 'X-Honeycomb-Team: {s}' https://api.honeycomb.io/1/auth",
    ),
    ("honeycomb-key", "hcaik_{a:58}", "HONEYCOMB_API_KEY={s}"),
    ("grafana-service-token", "glsa_{A:32}_{h:8}", "GRAFANA_TOKEN={s}"),
    ("grafana-cloud-token", "glc_{b:60}", "GRAFANA_CLOUD_TOKEN={s}"),
    ("dynatrace-token", "dt0c01.{U:24}.{A:64}", "DT_API_TOKEN={s}"),
    (
        "pagerduty-token",
        "u+{w:18}",
        "curl -H 'Authorization: Token token={s}' https://api.pagerduty.com/users",
    ),
    (
        "pagerduty-routing-key",
        "{h:32}",
        '{{"routing_key": "{s}", "event_action": "trigger"}}',
    ),
    (
        "opsgenie-key",
        "{uuid}",
        "curl -H 'Authorization: GenieKey {s}' https://api.opsgenie.com/v2/alerts",
    ),
    (
        "splunk-hec-token",
        "{uuid}",
        "curl -H 'Authorization: Splunk {s}' https://splunk:8088/services/collector",
    ),
    (
        "elastic-api-key",
        "{b:48}",
        "curl -H 'Authorization: ApiKey {s}' https://es:9200/_cat/indices",
    ),
    ("linear-key", "lin_api_{A:40}", "LINEAR_API_KEY={s}"),
    ("notion-token", "ntn_{d:11}{A:35}", "NOTION_TOKEN={s}"),
    ("atlassian-token", "ATATT3xFfGF0{w:170}={H:8}", "JIRA_API_TOKEN={s}"),
    ("asana-pat", "2/{d:16}/{d:16}:{h:32}", "ASANA_ACCESS_TOKEN={s}"),
    ("figma-token", "figd_{w:40}", "FIGMA_TOKEN={s}"),
    ("airtable-pat", "pat{A:14}.{h:64}", "AIRTABLE_API_KEY={s}"),
    ("postman-key", "PMAK-{h:24}-{h:34}", "POSTMAN_API_KEY={s}"),
    ("contentful-token", "CFPAT-{w:43}", "CONTENTFUL_MANAGEMENT_TOKEN={s}"),
    ("launchdarkly-key", "sdk-{uuid}", "LAUNCHDARKLY_SDK_KEY={s}"),
    ("snyk-token", "{uuid}", "SNYK_TOKEN={s}"),
    ("codecov-token", "{uuid}", "CODECOV_TOKEN={s}"),
    (
        "okta-token",
        "00{w:40}",
        "curl -H 'Authorization: SSWS {s}' https://acme.okta.com/api/v1/users",
    ),
    ("auth0-client-secret", "{w:64}", "AUTH0_CLIENT_SECRET={s}"),
    ("fcm-server-key", "AAAA{w:7}:APA91b{w:134}", "FCM_SERVER_KEY={s}"),
    (
        "hasura-admin-secret",
        "{A:32}",
        "curl -H 'x-hasura-admin-secret: {s}' https://acme.hasura.app/v1/graphql",
    ),
    ("algolia-admin-key", "{h:32}", "ALGOLIA_ADMIN_KEY={s}"),
    (
        "mapbox-secret-token",
        "sk.eyJ1IjoiYWNtZSIsImEiOiJ{w:20}.{w:22}",
        "MAPBOX_SECRET_TOKEN={s}",
    ),
    # secrets managers, keys
    ("vault-token", "hvs.{w:90}", "vault login {s}"),
    ("vault-token", "hvs.{w:90}", "export VAULT_TOKEN={s}"),
    ("doppler-token", "dp.st.prd.{A:43}", "DOPPLER_TOKEN={s}"),
    ("onepassword-service-token", "ops_eyJ{b:240}", "OP_SERVICE_ACCOUNT_TOKEN={s}"),
    ("age-identity", "AGE-SECRET-KEY-1{B:58}", "# created: 2026-11-30\n{s}"),
    ("pulumi-token", "pul-{h:40}", "PULUMI_ACCESS_TOKEN={s}"),
    (
        "rsa-private-key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA{b:45}\n{b:48}\n{b:48}\n-----END RSA PRIVATE KEY-----",
        "$ cat deploy.pem\n{s}",
    ),
    (
        "openssh-private-key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA{b:30}\n{b:48}\n{b:48}\n-----END OPENSSH PRIVATE KEY-----",
        "{s}",
    ),
    (
        "ec-private-key",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI{b:42}\n{b:48}\n-----END EC PRIVATE KEY-----",
        "key.pem:\n{s}",
    ),
    (
        "pgp-private-key",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQVYBG{b:42}\n{b:48}\n{b:48}\n-----END PGP PRIVATE KEY BLOCK-----",
        "{s}",
    ),
    (
        "wireguard-private-key",
        "{b:32}",
        "[Interface]\nPrivateKey = {s}\nAddress = 10.0.0.2/32",
    ),
    (
        "jwt-bearer",
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiZXhwIjoxODAwMDAwMDAwfQ.{u:64}",
        "curl -H 'Authorization: Bearer {s}' https://api.acme.dev/me",
    ),
    (
        "k8s-sa-token",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6Ik{w:30}In0.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0.{u:128}",
        "kubectl --token={s} get pods",
    ),
    # frameworks' own secrets
    ("django-secret-key", "django-insecure-{w:50}", "SECRET_KEY = '{s}'"),
    ("rails-secret-key-base", "{h:128}", "secret_key_base: {s}"),
    ("flask-secret-key", "{A:32}", 'app.secret_key = "{s}"'),
    ("jwt-signing-secret", "{A:48}", "JWT_SECRET={s}"),
    ("session-secret", "{A:40}", "SESSION_SECRET={s}"),
    ("encryption-key", "{b:32}", "ENCRYPTION_KEY={s}"),
    ("nextauth-secret", "{b:32}", "NEXTAUTH_SECRET={s}"),
    ("laravel-app-key", "base64:{b:32}", "APP_KEY={s}"),
    ("oauth-client-secret", "{w:40}", "  client_secret: {s}"),
    ("yaml-bearer", "{A:40}", "auth:\n  bearer: {s}"),
    (
        "generic-api-token",
        "{A:32}",
        "curl -H 'X-Auth-Token: {s}' https://api.acme.dev/v1/items",
    ),
    (
        "generic-api-key-query",
        "{A:32}",
        "https://api.weather.example/v1/forecast?q=Paris&api_key={s}",
    ),
    (
        "generic-bearer",
        "{A:40}",
        "curl -H 'Authorization: Bearer {s}' https://api.acme.dev",
    ),
    ("basic-auth-header", "{b:18}", "Authorization: Basic {s}"),
    (
        "docker-config-auth",
        "{b:24}",
        '{{"auths": {{"registry.acme.dev": {{"auth": "{s}"}}}}}}',
    ),
    ("npmrc-auth", "{b:24}", "_auth={s}"),
    # passwords on command lines and in code
    ("htpasswd-password", "{pw}", "htpasswd -b -c /etc/nginx/.htpasswd admin {s}"),
    ("rabbitmq-password", "{pw}", "rabbitmqctl add_user worker {s}"),
    ("rabbitmq-password", "{pw}", "rabbitmqctl change_password admin {s}"),
    ("cqlsh-password", "{pw}", "cqlsh -u cassandra -p {s} 10.0.0.5"),
    (
        "ldap-bind-password",
        "{pw}",
        'ldapsearch -x -D "cn=admin,dc=example,dc=org" -w {s} -b "dc=example,dc=org"',
    ),
    ("keytool-storepass", "{pw}", "keytool -list -keystore app.jks -storepass {s}"),
    (
        "keytool-keypass",
        "{pw}",
        "keytool -genkeypair -alias app -keypass {s} -keystore app.jks",
    ),
    ("mysql-password", "{pw}", "mysql -u root -p{s} -e 'show databases'"),
    ("mysql-password", "{pw}", "mysqldump -u app --password={s} app > dump.sql"),
    ("pgpassword", "{pw}", "PGPASSWORD='{s}' psql -h db -U app"),
    ("sshpass-password", "{pw}", "sshpass -p '{s}' ssh deploy@10.0.0.4"),
    ("redis-cli-password", "{pw}", "redis-cli -h cache -a {s} ping"),
    ("sqlcmd-password", "{pw}", "sqlcmd -S db -U sa -P {s} -Q 'select 1'"),
    ("smbclient-password", "{pw}", "smbclient //fs/share -U dana%{s}"),
    (
        "curl-user-password",
        "{pw}",
        "curl -u admin:{s} http://localhost:15672/api/overview",
    ),
    (
        "wget-password",
        "{pw}",
        "wget --user=dana --password={s} https://files.acme.dev/a.tgz",
    ),
    (
        "openssl-passout",
        "{pw}",
        "openssl pkcs12 -export -in cert.pem -inkey key.pem -out a.p12 -passout pass:{s}",
    ),
    ("mongosh-password", "{pw}", "mongosh --host db -u admin -p {s}"),
    ("net-use-password", "{pw}", "net use Z: \\\\fs\\share /user:ACME\\dana {s}"),
    (
        "docker-env-password",
        "{pw}",
        "docker run -e POSTGRES_PASSWORD={s} -d postgres:16",
    ),
    (
        "helm-set-password",
        "{pw}",
        "helm install db bitnami/postgresql --set auth.postgresPassword={s}",
    ),
    (
        "k8s-literal-password",
        "{pw}",
        "kubectl create secret generic db --from-literal=password={s}",
    ),
    ("terraform-var-password", "{pw}", "terraform apply -var 'db_password={s}'"),
    ("xml-password", "{pw}", "<password>{s}</password>"),
    (
        "python-kwarg-password",
        "{pw}",
        'conn = psycopg2.connect(host="db", user="app", password="{s}")',
    ),
    ("go-struct-password", "{pw}", 'cfg := Config{{User: "app", Password: "{s}"}}'),
    ("js-api-key", "{A:32}", 'const apiKey = "{s}";'),
    ("toml-token", "{A:40}", 'token = "{s}"'),
    ("ini-password", "{pw}", "[database]\nuser = app\npassword = {s}"),
    ("json-password", "{pw}", '{{"username": "app", "password": "{s}"}}'),
    ("env-db-password", "{pw}", "DB_PASSWORD={s}"),
    ("git-credentials", "{pw}", "https://dana:{s}@git.acme.dev"),
)


# -- look-alikes ------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _sri(g: Gen, alg: str) -> str:
    return f"{alg}-" + _b64(hashlib.new(alg, g.raw(16)).digest())


def _b58check_addr(g: Gen, n: int) -> str:
    return "1" + g.chars("5", n)


# (kind, the value's template, the line's template: {s} is the value)
_LOOKALIKES: tuple[tuple[str, str, str], ...] = (
    ("npm-integrity", "@sri:sha512", '      "integrity": "{s}",'),
    ("npm-integrity", "@sri:sha512", "  integrity {s}"),
    (
        "sri-script",
        "@sri:sha384",
        '<script src="https://cdn.acme.dev/app.js" integrity="{s}" crossorigin="anonymous"></script>',
    ),
    ("pip-hash", "sha256:{h:64}", "requests==2.32.3 \\\n    --hash={s}"),
    (
        "pip-hash",
        "{h:64}",
        "Successfully built acme\n  Created wheel for acme: filename=acme-1.0-py3-none-any.whl size=4521 sha256={s}",
    ),
    (
        "uv-lock-hash",
        "sha256:{h:64}",
        'wheels = [{{ url = "https://files.pythonhosted.org/packages/x/acme-1.0.whl", hash = "{s}" }}]',
    ),
    (
        "poetry-lock-hash",
        "sha256:{h:64}",
        '    {{file = "acme-1.0.tar.gz", hash = "{s}"}},',
    ),
    ("go-sum", "h1:{b:32}", "github.com/acme/lib v1.4.2 {s}"),
    ("cargo-checksum", "{h:64}", 'checksum = "{s}"'),
    ("terraform-lock-hash", "zh:{h:64}", '    "{s}",'),
    ("docker-digest", "sha256:{h:64}", "FROM python:3.12-slim@{s}"),
    ("docker-image-id", "{h:12}", "acme/api   latest   {s}   2 hours ago   412MB"),
    ("git-sha", "{h:40}", "commit {s}\nAuthor: Dana <dana@example.com>"),
    ("git-sha-pinned-action", "{h:40}", "      - uses: actions/checkout@{s} # v4.2.2"),
    (
        "git-lfs-oid",
        "sha256:{h:64}",
        "version https://git-lfs.github.com/spec/v1\noid {s}\nsize 1048576",
    ),
    ("uuid4", "{uuid}", '"request_id": "{s}"'),
    ("uuid7", "{uuid7}", "INSERT INTO events (id) VALUES ('{s}');"),
    ("ulid", "01{C:24}", '"id": "{s}",'),
    ("ksuid", "{A:27}", "ksuid: {s}"),
    ("nanoid", "{w:21}", 'const id = "{s}"; // nanoid()'),
    ("snowflake-id", "1{d:18}", '"channel_id": "{s}",'),
    ("mongodb-objectid", "{h:24}", '{{"_id": ObjectId("{s}")}}'),
    ("bitcoin-address", "@btc", "Send to {s}"),
    ("bitcoin-bech32-address", "bc1q{k:38}", "address: {s}"),
    ("ethereum-address", "0x{h:40}", '"to": "{s}",'),
    ("solana-address", "{5:44}", "solana transfer {s} 0.5"),
    ("ipfs-cid-v0", "Qm{5:44}", "ipfs cat {s}"),
    ("ipfs-cid-v1", "bafybei{z:52}", "https://{s}.ipfs.dweb.link/"),
    (
        "ssh-ed25519-pubkey",
        "AAAAC3NzaC1lZDI1NTE5AAAAI{b:24}",
        "ssh-ed25519 {s} dana@laptop",
    ),
    (
        "ssh-rsa-pubkey",
        "AAAAB3NzaC1yc2EAAAADAQABAAABAQ{b:120}",
        "ssh-rsa {s} deploy@ci",
    ),
    ("ssh-host-fingerprint", "SHA256:{b:32}", "ED25519 key fingerprint is {s}."),
    (
        "known-hosts-hashed",
        "|1|{b:20}|{b:20}",
        "{s} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleHostKeyOnlyForTests",
    ),
    (
        "wireguard-public-key",
        "{b:32}",
        "[Peer]\nPublicKey = {s}\nAllowedIPs = 10.0.0.0/24",
    ),
    (
        "jwks-modulus",
        "{u:128}",
        '{{"kty": "RSA", "e": "AQAB", "use": "sig", "kid": "k1", "n": "{s}"}}',
    ),
    (
        "jwks-ec-x",
        "{u:32}",
        '{{"kty": "EC", "crv": "P-256", "x": "{s}", "y": "{u:32}"}}',
    ),
    (
        "webauthn-credential-id",
        "{u:32}",
        '{{"credentialId": "{s}", "publicKeyAlgorithm": -7}}',
    ),
    ("webauthn-public-key", "pQECAyYgASFYI{u:60}", '"publicKey": "{s}"'),
    ("cosign-signature", "MEUCIQ{b:66}", "cosign verify: Signature: {s}"),
    ("xmldsig-signature", "{b:96}", "<ds:SignatureValue>{s}</ds:SignatureValue>"),
    ("xmldsig-digest", "{b:32}", "<ds:DigestValue>{s}</ds:DigestValue>"),
    (
        "pem-certificate",
        "MIIDdzCCAl+gAwIBAgIE{b:42}",
        "-----BEGIN CERTIFICATE-----\n{s}\n{b:48}\n-----END CERTIFICATE-----",
    ),
    (
        "pem-public-key",
        "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA{b:33}",
        "-----BEGIN PUBLIC KEY-----\n{s}\n-----END PUBLIC KEY-----",
    ),
    (
        "k8s-ca-bundle",
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM{b:60}",
        "    certificate-authority-data: {s}",
    ),
    ("gpg-fingerprint", "{H:40}", "gpg --recv-keys {s}"),
    ("tls-cert-sha256", "@colonhex", "SHA256 Fingerprint={s}"),
    ("onion-address", "{z:56}.onion", "http://{s}/"),
    ("magnet-btih", "{h:40}", "magnet:?xt=urn:btih:{s}&dn=ubuntu-24.04.iso"),
    ("nix-store-path", "{k:32}", "/nix/store/{s}-python3-3.12.4"),
    ("go-build-id", "{w:20}/{w:20}/{w:20}/{w:20}", 'go: Build ID: "{s}"'),
    ("s3-etag", "{h:32}", '            "ETag": "\\"{s}\\"",'),
    ("s3-object-key", "uploads/2026/11/{w:22}.bin", '            "Key": "{s}",'),
    ("s3-object-key", "{A:32}", '            "Key": "{s}",'),
    ("s3-version-id", "{w:32}", '            "VersionId": "{s}",'),
    ("aws-request-id", "{U:16}", "x-amz-request-id: {s}"),
    ("aws-extended-request-id", "{b:56}", "x-amz-id-2: {s}"),
    ("aws-account-arn", "arn:aws:iam::{d:12}:role/{A:20}", '"Arn": "{s}"'),
    ("cloudfront-request-id", "{w:56}==", "X-Amz-Cf-Id: {s}"),
    ("webpack-chunk-hash", "{h:20}", "main.{s}.js   512 KiB"),
    ("vite-asset-hash", "{w:8}", "dist/assets/index-{s}.js   142.31 kB"),
    ("nextjs-build-id", "{w:21}", '"buildId":"{s}"'),
    ("k8s-pod-name", "api-{a:10}-{a:5}", "{s}   1/1   Running   0   3h"),
    ("k8s-uid", "{uuid}", "  uid: {s}"),
    ("anthropic-object-id", "toolu_01{A:22}", '"tool_use_id": "{s}"'),
    ("anthropic-message-id", "msg_01{A:22}", '"id": "{s}",'),
    ("openai-completion-id", "chatcmpl-{A:29}", '"id": "{s}",'),
    ("openai-file-id", "file-{A:22}", '"file_id": "{s}"'),
    ("stripe-object-id", "cus_{A:14}", '"customer": "{s}",'),
    ("stripe-publishable-key", "pk_live_{A:99}", "<script>Stripe('{s}')</script>"),
    ("twilio-account-sid", "AC{h:32}", '"account_sid": "{s}",'),
    (
        "google-oauth-client-id",
        "{d:12}-{a:32}.apps.googleusercontent.com",
        "GOOGLE_CLIENT_ID={s}",
    ),
    (
        "recaptcha-site-key",
        "6L{w:38}",
        '<div class="g-recaptcha" data-sitekey="{s}"></div>',
    ),
    (
        "sentry-dsn-public",
        "https://{h:32}@o{d:6}.ingest.sentry.io/{d:7}",
        "Sentry.init({{ dsn: '{s}' }})",
    ),
    ("cloudflare-ray-id", "{h:16}-CDG", "cf-ray: {s}"),
    ("base64-json", "@b64json", "echo {s} | base64 -d"),
    ("base64-text", "@b64text", "data: {s}"),
    (
        "data-uri-png",
        "iVBORw0KGgoAAAANSUhEUgAA{b:60}",
        '<img src="data:image/png;base64,{s}">',
    ),
    ("sha1-checksum", "{h:40}", "{s}  acme-1.0.tar.gz"),
    ("md5-checksum", "{h:32}", "MD5 ({s}) = acme.zip"),
    ("gradle-checksum", "{h:64}", '<sha256 value="{s}" origin="Generated by Gradle"/>'),
    ("yarn-berry-checksum", "10c0/{h:128}", "  checksum: {s}"),
    ("pnpm-integrity", "@sri:sha512", "    resolution: {{integrity: {s}}}"),
    ("composer-shasum", "{h:40}", '            "shasum": "{s}"'),
    ("nuget-content-hash", "{b:64}", '      "contentHash": "{s}",'),
    ("bazel-sha256", "{h:64}", '    sha256 = "{s}",'),
    ("homebrew-sha256", "{h:64}", '  sha256 cellar: :any, arm64_sonoma: "{s}"'),
    ("csp-nonce", "{b:16}", '<script nonce="{s}">init()</script>'),
    ("etag-weak", 'W/\\"{h:40}\\"', '"etag": "{s}"'),
    ("cache-key", "{h:64}", "Cache restored from key: Linux-pip-{s}"),
    (
        "salt-public",
        "{b:16}",
        "Argon2id params: m=65536,t=3,p=4 salt={s} (stored with the hash)",
    ),
    ("git-tree-id", "{h:40}", "100644 blob {s}\tREADME.md"),
    ("container-id", "{h:64}", "CONTAINER ID: {s}"),
)


def _special(kind: str, g: Gen) -> str:
    if kind.startswith("@sri:"):
        return _sri(g, kind[5:])
    if kind == "@btc":
        return _b58check_addr(g, 33)
    if kind == "@colonhex":
        return ":".join(g.chars("H", 2) for _ in range(32))
    if kind == "@b64json":
        n = g.rng.randrange(1000)
        return _b64(f'{{"user": "dana", "page": {n}, "sort": "desc"}}'.encode())
    if kind == "@b64text":
        words = [
            "the",
            "build",
            "passed",
            "after",
            "retrying",
            "flaky",
            "tests",
            "twice",
        ]
        g.rng.shuffle(words)
        return _b64(" ".join(words).encode())
    raise KeyError(kind)


def _unbrace(line: str) -> str:
    return line.replace("{{", "{").replace("}}", "}")


def _build_secrets() -> list[Fake]:
    g = Gen(SEED)
    out = []
    for kind, template, line in _SECRETS:
        secret = g.fill(template)
        out.append(Fake(kind, secret, _unbrace(g.fill(line, secret))))
    return out


LOOKALIKE_COPIES = 5


def _build_lookalikes() -> list[Lookalike]:
    g = Gen(SEED + 1)
    out = []
    for kind, template, line in _LOOKALIKES:
        for _ in range(LOOKALIKE_COPIES):
            value = (
                _special(template, g) if template.startswith("@") else g.fill(template)
            )
            out.append(Lookalike(kind, value, _unbrace(g.fill(line, value))))
    return out


SECRETS: list[Fake] = _build_secrets()
LOOKALIKES: list[Lookalike] = _build_lookalikes()
