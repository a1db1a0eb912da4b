"""gql's AppSyncWebsocketsTransport with AppSyncIAMAuthentication (botocore's SigV4Auth signs the
connect and each start), run from .venv-aws: subscribes to `onTick` at URL, prints each `n` it
receives, one per line, and exits after COUNT. Usage:
    python gql_appsync_iam.py URL HOST REGION KEY_ID SECRET TOKEN COUNT
"""

import asyncio
import sys

from botocore.credentials import Credentials
from gql import Client, gql
from gql.transport.appsync_auth import AppSyncIAMAuthentication
from gql.transport.appsync_websockets import AppSyncWebsocketsTransport


async def main(url: str, host: str, region: str, key_id: str, secret: str, token: str, count: int) -> None:
    auth = AppSyncIAMAuthentication(host=host, region_name=region, credentials=Credentials(key_id, secret, token))
    transport = AppSyncWebsocketsTransport(url=url, auth=auth)
    received = 0
    async with Client(transport=transport, fetch_schema_from_transport=False) as session:
        async for result in session.subscribe(gql("subscription { onTick { n } }")):
            print(result["onTick"]["n"], flush=True)
            received += 1
            if received == count:
                return


if __name__ == "__main__":
    url, host, region, key_id, secret, token, count = sys.argv[1:8]
    asyncio.run(asyncio.wait_for(main(url, host, region, key_id, secret, token, int(count)), 30))
