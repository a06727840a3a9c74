from __future__ import annotations

from django.db import models

from django_snowflake.fields import SnowflakeAutoField


class Note(models.Model):
    id = SnowflakeAutoField(primary_key=True)
    text = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.text
