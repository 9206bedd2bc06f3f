from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.services import issue_api_token


class Command(BaseCommand):
    help = "Create an API token for a user (for `tp login`) and print it once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")

    def handle(self, *args, username: str, name: str, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        _token, secret = issue_api_token(user, name=name)
        self.stdout.write(secret)
