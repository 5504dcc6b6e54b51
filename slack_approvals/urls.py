from django.urls import path

from slack_approvals.interactions import interactions
from slack_approvals.views import connect_page

urlpatterns = [
    path("interactions", interactions, name="slack_interactions"),
    path("connect", connect_page, name="slack_connect"),
]
