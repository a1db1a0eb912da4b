#!/usr/bin/env python3
"""Prints the Signature Version 4 vectors gqlmuxd's signer is tested against, as botocore (the
AWS SDK for Python) computes them: the headers AppSync's IAM authorization sends for the
real-time connect (POST https://HOST/graphql/connect, body {}), for a `start` (POST
https://HOST/graphql, body the request's JSON string), and for an HTTP query, each at a fixed time
with fixed credentials, with and without a session token, and an HTTP query to a URL with a
query string. gql's AppSyncIAMAuthentication builds
the same requests. Needs botocore (pip install botocore); regenerate with
    python3 scripts/sigv4-vectors.py > Tests/Fixtures/sigv4-botocore.json
"""

import datetime
import json
from unittest import mock

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

APPSYNC_HEADERS = {
    "accept": "application/json, text/javascript",
    "content-encoding": "amz-1.0",
    "content-type": "application/json; charset=UTF-8",
}


def sign(host, region, credentials, url_path, body, headers, when):
    request = AWSRequest(method="POST", url=f"https://{host}{url_path}", headers=dict(headers), data=body)
    # The signing time fixed: botocore reads it from get_current_datetime.
    with mock.patch("botocore.auth.get_current_datetime", return_value=when.replace(tzinfo=None)):
        SigV4Auth(credentials, "appsync", region).add_auth(request)
    return dict(request.headers)


def main():
    when = datetime.datetime(2026, 11, 26, 9, 5, 7, tzinfo=datetime.timezone.utc)
    host = "abcdefghijklmnopqrstuvwxyz.appsync-api.eu-west-1.amazonaws.com"
    cases = []
    for token in (None, "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJGMEQCIH7example+token=="):
        credentials = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", token)
        for name, path, body, headers in (
            ("connect", "/graphql/connect", "{}", APPSYNC_HEADERS),
            ("start", "/graphql", json.dumps({"query": "subscription OnTick { onTick { n } }", "variables": {"c": 1}}, separators=(",", ":")), APPSYNC_HEADERS),
            ("http", "/graphql", '{"query":"{ hello }"}', {}),
            # A custom endpoint whose URL carries a query string: signed, sorted and encoded.
            ("http with a query string", "/graphql?stage=b%20eta&api=v1&api=a&flag&t=~x", '{"query":"{ hello }"}', {}),
        ):
            signed = sign(host, "eu-west-1", credentials, path, body, headers, when)
            cases.append({
                "name": name + (" with a session token" if token else ""),
                "host": host, "region": "eu-west-1", "path": path, "body": body,
                "headers": headers, "accessKeyID": credentials.access_key, "secretAccessKey": credentials.secret_key,
                "sessionToken": token, "time": int(when.timestamp()),
                "signed": signed,
            })
    print(json.dumps(cases, indent=2))


if __name__ == "__main__":
    main()
