"""machine's own provider rules: token shapes with a documented prefix.

The engine (``engine.py``, Kingfisher's built-in rules) is the provider
layer; these rules stay for the providers it does not find as machine meets
them (Tinker's ``tml-``, Tavily's ``tvly-dev-``, Fly, Harness, Braintree,
GitHub tokens behind an escaped newline ...), measured on both test corpora
(bench/RESULTS.md, "Secret scanner: the engine and machine's own layer").
Where both find a token, the engine's rule names it.

The table is data; ``tokens.py`` dispatches each run of token characters
to the rules that start with its first two characters. Tokens that are not
one run (dotted ones, ``<id>|<secret>``, shapes found by a literal such as
``Q~`` or a webhook host) are in ``shapes.py``.
"""

from __future__ import annotations

# (kind, literal prefixes, the full token's regex, check of the part after the
# prefix: "any" = not a template like xxxx, "random" = random-looking,
# "digits" = has a digit and entropy, "mixed" = mixed case, not words)
Provider = tuple[str, tuple[str, ...], str, str]

PROVIDERS: tuple[Provider, ...] = (
    # -- AI providers ---------------------------------------------------------
    ("anthropic-api-key", ("sk-ant-",), r"sk-ant-[\w-]{32,}", "any"),
    ("openrouter-api-key", ("sk-or-",), r"sk-or-v1-[0-9a-f]{64}", "any"),
    (
        "openai-api-key",
        ("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"),
        r"sk-(?:proj|svcacct|admin|None)-[\w-]{20,}",
        "any",
    ),
    ("openai-api-key", ("sk-",), r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", "any"),
    ("openai-api-key", ("sk-",), r"sk-[A-Za-z0-9]{32,}", "digits"),
    ("tinker-api-key", ("tml-",), r"tml-[\w-]{16,}", "random"),
    ("xai-api-key", ("xai-",), r"xai-[A-Za-z0-9]{60,}", "any"),
    ("groq-api-key", ("gsk_",), r"gsk_[A-Za-z0-9]{48,}", "any"),
    ("replicate-api-token", ("r8_",), r"r8_[A-Za-z0-9]{37}", "any"),
    ("perplexity-api-key", ("pplx-",), r"pplx-[A-Za-z0-9]{40,}", "any"),
    (
        "langsmith-api-key",
        ("lsv2_pt_", "lsv2_sk_"),
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        "any",
    ),
    ("tavily-api-key", ("tvly-",), r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{24,}", "any"),
    ("huggingface-token", ("hf_",), r"hf_[A-Za-z0-9]{30,}", "cased"),
    ("huggingface-token", ("api_org_",), r"api_org_[A-Za-z0-9]{30,}", "cased"),
    # -- code hosts, registries, CI ---------------------------------------------
    (
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"gh[pousr]_[A-Za-z0-9]{36,251}",
        "any",
    ),
    ("github-token", ("github_pat_",), r"github_pat_\w{40,}", "any"),
    (
        "gitlab-token",
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glft-",
            "glimt-",
            "gloas-",
            "glsoat-",
            "glagent-",
            "glffct-",
        ),
        r"gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent|ffct)-[\w-]{20,}"
        r"(?:\.[0-9a-z]{2}[0-9a-z]{7})?",
        "any",
    ),
    ("gitlab-token", ("GR1348941",), r"GR1348941[\w-]{20,}", "any"),
    ("npm-token", ("npm_",), r"npm_[A-Za-z0-9]{36}", "any"),
    ("pypi-token", ("pypi-AgE",), r"pypi-AgE[\w-]{50,}", "any"),
    ("rubygems-token", ("rubygems_",), r"rubygems_[a-f0-9]{48}", "any"),
    ("clojars-token", ("CLOJARS_",), r"CLOJARS_[A-Za-z0-9]{60}", "any"),
    ("dockerhub-token", ("dckr_pat_",), r"dckr_pat_[\w-]{27,}", "any"),
    ("artifactory-token", ("AKCp",), r"AKCp[A-Za-z0-9]{69}", "any"),
    ("artifactory-token", ("cmVmd",), r"cmVmd[A-Za-z0-9]{59}", "random"),
    (
        "sourcegraph-token",
        ("sgp_",),
        r"sgp_(?:(?:[a-fA-F0-9]{16}|local)_)?[a-fA-F0-9]{40}",
        "any",
    ),
    ("readme-api-token", ("rdme_",), r"rdme_[a-z0-9]{70}", "any"),
    ("prefect-api-token", ("pnu_",), r"pnu_[A-Za-z0-9]{36}", "any"),
    ("infracost-api-token", ("ico-",), r"ico-[A-Za-z0-9]{32}", "random"),
    (
        "chieftools-token",
        ("ctp_", "cto_", "ctr_"),
        r"ct[por]_[A-Za-z0-9]{30,248}",
        "random",
    ),
    # -- clouds and hosting ----------------------------------------------------------
    (
        "aws-access-key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        "any",
    ),
    ("aws-bedrock-key", ("ABSK",), r"ABSK[A-Za-z0-9+/]{109,269}={0,2}", "any"),
    ("google-api-key", ("AIza",), r"AIza[\w-]{35}", "any"),
    ("google-oauth-secret", ("GOCSPX-",), r"GOCSPX-[\w-]{28}", "any"),
    ("alibaba-access-key", ("LTAI",), r"LTAI[A-Za-z0-9]{20}", "random"),
    (
        "digitalocean-token",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        r"do[opr]_v1_[a-f0-9]{64}",
        "any",
    ),
    ("heroku-api-key", ("HRKU-",), r"HRKU-[\w-]{60,}", "any"),
    (
        "fly-token",
        ("fm1a_", "fm1r_", "fm2_", "fo1_"),
        r"fm(?:1[ar]|2)_[\w+/-]{60,}={0,3}|fo1_[\w-]{43}",
        "any",
    ),
    ("netlify-token", ("nfp_",), r"nfp_[A-Za-z0-9]{36,}", "any"),
    ("pulumi-token", ("pul-",), r"pul-[a-f0-9]{40}", "any"),
    ("supabase-token", ("sbp_",), r"sbp_[a-f0-9]{40}", "any"),
    ("supabase-token", ("sb_secret_",), r"sb_secret_[\w-]{20,}", "any"),
    (
        "planetscale-token",
        ("pscale_tkn_", "pscale_oauth_", "pscale_pw_"),
        r"pscale_(?:tkn|oauth|pw)_[\w=.-]{32,64}",
        "any",
    ),
    ("scalingo-api-token", ("tk-us-",), r"tk-us-[\w-]{48}", "any"),
    ("databricks-token", ("dapi",), r"dapi[a-f0-9]{32}(?:-[0-9])?", "any"),
    ("clickhouse-api-key", ("4b1d",), r"4b1d[A-Za-z0-9]{38}", "random"),
    (
        "castai-api-key",
        ("castai_v1_",),
        r"castai_v1_[A-Za-z0-9]{64}_[A-Za-z0-9]{8}",
        "any",
    ),
    ("yandex-api-key", ("AQVN",), r"AQVN[\w-]{35,38}", "random"),
    # -- identity, secrets managers --------------------------------------------------
    (
        "onepassword-token",
        ("ops_eyJ",),
        r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}",
        "any",
    ),
    (
        "onepassword-secret-key",
        ("A3-",),
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
        r"-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        "any",
    ),
    (
        "age-secret-key",
        ("AGE-SECRET-KEY-1",),
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        "any",
    ),
    ("grafana-token", ("glsa_",), r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", "any"),
    ("grafana-token", ("glc_",), r"glc_[A-Za-z0-9+/]{32,}={0,2}", "any"),
    ("grafana-token", ("eyJrIjoi",), r"eyJrIjoi[A-Za-z0-9]{70,400}={0,3}", "any"),
    ("jwt", ("ZXlK",), r"ZXlK[A-Za-z0-9+/_-]{40,}={0,2}", "random"),
    (
        "aws-bedrock-key",
        ("bedrock-api-key-",),
        r"bedrock-api-key-[A-Za-z0-9+/=]{40,}",
        "any",
    ),
    # -- payments, commerce ----------------------------------------------------------
    (
        "stripe-key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_", "sk_prod_", "rk_prod_"),
        r"[sr]k_(?:live|test|prod)_[0-9A-Za-z]{10,}",
        "any",
    ),
    ("stripe-webhook-secret", ("whsec_",), r"whsec_[0-9A-Za-z+/]{24,}", "any"),
    (
        "square-token",
        ("sq0atp-", "sq0csp-", "EAAA"),
        r"(?:EAAA|sq0atp-)[\w-]{22,60}|sq0csp-[\w-]{43}",
        "random",
    ),
    (
        "shopify-token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        "any",
    ),
    (
        "shippo-api-token",
        ("shippo_live_", "shippo_test_"),
        r"shippo_(?:live|test)_[a-fA-F0-9]{40}",
        "any",
    ),
    (
        "flutterwave-key",
        ("FLWSECK_TEST-", "FLWSECK-"),
        r"FLWSECK(?:_TEST)?-[a-hA-H0-9]{12,32}(?:-X)?",
        "any",
    ),
    (
        "plaid-token",
        ("access-sandbox-", "access-development-", "access-production-"),
        r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}"
        r"-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "any",
    ),
    # Lob, Adyen client keys, Chargebee: test_/live_ and a random body
    ("payment-api-key", ("live_", "test_"), r"(?:live|test)_[a-f0-9]{35}", "any"),
    (
        "payment-api-key",
        ("live_", "test_"),
        r"(?:live|test)_[A-Za-z0-9]{30,40}",
        "random",
    ),
    (
        "braintree-key",
        ("sandbox_", "production_"),
        r"(?:sandbox|production)_[a-z0-9]{8}_[a-z0-9]{16}",
        "any",
    ),
    (
        "duffel-api-token",
        ("duffel_test_", "duffel_live_"),
        r"duffel_(?:test|live)_[\w=-]{43}",
        "any",
    ),
    ("easypost-api-token", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}", "any"),
    # -- messaging, social, mail -----------------------------------------------------
    ("slack-token", ("xox",), r"xox[abposer]-[0-9A-Za-z-]{10,}", "any"),
    ("slack-token", ("xapp-",), r"xapp-[0-9]-[A-Za-z0-9-]{20,}", "any"),
    ("twilio-api-key", ("SK",), r"SK[0-9a-f]{32}", "any"),
    ("mailgun-api-key", ("key-",), r"key-[0-9a-f]{32}", "any"),
    (
        "sendinblue-api-key",
        ("xkeysib-", "xsmtpsib-"),
        r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        "any",
    ),
    ("facebook-token", ("EAAM", "EAAC"), r"EAA[MC][A-Za-z0-9]{100,}", "any"),
    (
        "twitter-bearer-token",
        ("AAAAAAAAAAAAAAAAAAAAA",),
        r"A{22}[A-Za-z0-9%]{80,100}",
        "random",
    ),
    ("typeform-api-token", ("tfp_",), r"tfp_[\w.=-]{59}", "any"),
    # -- work tools ------------------------------------------------------------------
    ("atlassian-api-token", ("ATATT3",), r"ATATT3[\w=-]{150,}", "any"),
    (
        "linear-api-key",
        ("lin_api_", "lin_oauth_"),
        r"lin_(?:api|oauth)_[A-Za-z0-9]{40}",
        "any",
    ),
    ("notion-token", ("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{35}", "any"),
    ("notion-token", ("secret_",), r"secret_[A-Za-z0-9]{43}", "mixed"),
    ("postman-api-key", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", "any"),
    ("figma-token", ("figd_",), r"figd_[\w-]{40,}", "any"),
    ("frameio-api-token", ("fio-u-",), r"fio-u-[\w=-]{64}", "any"),
    ("sentry-token", ("sntrys_", "sntryu_"), r"sntry[su]_[\w=+/-]{40,}", "any"),
    (
        "new-relic-key",
        ("NRAK-", "NRII-", "NRJS-"),
        r"NRAK-[A-Z0-9]{27}|NRII-[\w-]{32}|NRJS-[a-f0-9]{19}",
        "any",
    ),
    ("octopus-api-key", ("API-",), r"API-[A-Z0-9]{26}", "digits"),
    ("adobe-client-secret", ("p8e-",), r"p8e-[A-Za-z0-9]{32}", "any"),
    (
        "intra42-client-secret",
        ("s-s4t2ud-", "s-s4t2af-"),
        r"s-s4t2(?:ud|af)-[a-f0-9]{64}",
        "any",
    ),
    (
        "settlemint-token",
        ("sm_aat_", "sm_pat_", "sm_sat_"),
        r"sm_[aps]at_[A-Za-z0-9]{16}",
        "any",
    ),
    ("defined-networking-token", ("dnkey-",), r"dnkey-[\w=-]{26}-[\w=-]{52}", "any"),
)

# The kinds that are not one provider's tokens.
SHAPES = (
    "telegram-bot-token",  # <digits>:AA<33>, found behind its colon
    "mailchimp-api-key",  # <32 hex>-us<dc>
    "discord-token",  # three dotted base64url parts
    "facebook-token",  # <app id>|<app secret>
    "aws-secret-key",  # 40 base64 characters next to an access key id
    "private-key",  # PEM, PGP, OpenSSH, PuTTY blocks
    "jwt",  # eyJ<header>.eyJ<payload>.<signature>
    "url-credentials",  # the password of scheme://user:password@host
    "auth-header",  # Authorization: / X-Api-Key: and other credential headers
    "cli-secret",  # -p<pw>, --password X, -u user:pw, sshpass -p X ...
    "env-secret",  # NAME=value, name: value, "name": "value", <name>value</name>
    "netrc-password",  # machine <host> login <user> password <pw>
    "pgpass-password",  # host:port:db:user:pw
)
