from django.urls import path

from slack_approvals.interactions import interactions

urlpatterns = [path("interactions", interactions, name="slack_interactions")]
